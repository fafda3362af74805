// Package script runs data-driven tests: files of commands, each followed
// by the output it must print, in the shape of etcd raft's rafttest and
// cockroachdb's datadriven scripts. A package supplies a map of handlers,
// one per command; the runner parses the files, calls the handler of each
// command, compares what it returns with the expected output, and reports
// a difference as file:line of the command. Run the tests with -rewrite to
// write the actual output into the files instead (then read the diff; only
// commit it if you understand what changed).
//
// # Format
//
// A file is a sequence of blocks separated by blank lines. Lines starting
// with '#' outside a block, and blank lines, are comments and are kept
// verbatim by -rewrite. A block is:
//
//	command arg key=value ...
//	input line        (optional, any number, no blank lines)
//	----
//	expected output   (any number of lines, none blank)
//	<blank line or end of file>
//
// The command line is the command's name and its fields, separated by
// spaces: bare words (positional arguments or flags such as "strict") and
// key=value pairs. An output containing blank lines is written between two
// doubled separators, and -rewrite chooses this form by itself when the
// output needs it:
//
//	command
//	----
//	----
//	first paragraph
//
//	second paragraph
//	----
//	----
//
// # Example
//
// A test of a counter with the commands "add" and "show":
//
//	func TestScripts(t *testing.T) {
//		script.Run(t, "testdata/*.txt", func(t *testing.T) script.Commands {
//			n := int64(0) // fresh state for every file
//			return script.Commands{
//				// add [by=N]: adds N (default 1), prints the total
//				"add": func(c *script.Case) string {
//					n += c.Int("by", 1)
//					return fmt.Sprint(n)
//				},
//				// show NAME...: prints each name with the total
//				"show": func(c *script.Case) string {
//					var out []string
//					for _, name := range c.Pos() {
//						out = append(out, fmt.Sprintf("%s=%d", name, n))
//					}
//					return strings.Join(out, "\n")
//				},
//			}
//		})
//	}
//
// and testdata/counter.txt:
//
//	# Adding moves the total.
//	add
//	----
//	1
//
//	add by=41
//	----
//	42
//
//	show a b
//	----
//	a=42
//	b=42
//
// A command that is not in the map, a block without its separator, input
// given to a command whose handler never reads it, and a malformed
// argument (c.Int of "x") fail the test at the command's file:line.
//
// Each package documents its own commands next to its handlers, with one
// line per command giving its syntax and what it prints.
package script
