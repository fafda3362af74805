package script

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of script tests (testdata) with the actual output")

// Commands maps a command's name to its handler, which returns the
// command's output (a trailing newline is ignored).
type Commands map[string]func(c *Case) string

// Case is one command of a script, as its handler sees it.
type Case struct {
	T         testing.TB
	File      string
	Line      int      // of the command line, 1-based
	Text      string   // the command line as written
	Cmd       string   // the command's name
	Fields    []string // the command line's fields after the name
	input     []string
	inputRead bool
}

// Input returns the lines between the command line and "----".
func (c *Case) Input() []string {
	c.inputRead = true
	return c.input
}

// Fatalf stops the script's test with the command's file:line.
func (c *Case) Fatalf(format string, args ...any) {
	c.T.Helper()
	c.T.Fatalf("%s:%d: %s: %s", c.File, c.Line, c.Cmd, fmt.Sprintf(format, args...))
}

// Arg returns the value of key=value, or "" and true for the bare word key.
func (c *Case) Arg(key string) (string, bool) {
	for _, f := range c.Fields {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			return v, true
		} else if !ok && f == key {
			return "", true
		}
	}
	return "", false
}

// Has reports whether key is given, as a bare word or key=value.
func (c *Case) Has(key string) bool {
	_, ok := c.Arg(key)
	return ok
}

// Str returns key's value, def when absent.
func (c *Case) Str(key, def string) string {
	if v, ok := c.Arg(key); ok {
		return v
	}
	return def
}

// Int returns key's value as an integer, def when absent; a value that is
// not an integer fails the test.
func (c *Case) Int(key string, def int64) int64 {
	c.T.Helper()
	v, ok := c.Arg(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		c.Fatalf("%s=%q: not an integer", key, v)
	}
	return n
}

// Pos returns the bare words (fields without '='), in order.
func (c *Case) Pos() []string {
	var p []string
	for _, f := range c.Fields {
		if !strings.Contains(f, "=") {
			p = append(p, f)
		}
	}
	return p
}

// Need returns the i'th bare word, failing the test when it is missing.
func (c *Case) Need(i int) string {
	c.T.Helper()
	p := c.Pos()
	if i >= len(p) {
		c.Fatalf("want at least %d positional arguments, have %d", i+1, len(p))
	}
	return p[i]
}

// Run runs every file matching glob (relative to the package's directory,
// e.g. "testdata/*.txt") as a subtest named after the file. setup is called
// once per file and returns the handlers, bound to fresh state.
func Run(t *testing.T, glob string, setup func(t *testing.T) Commands) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s (%v)", glob, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			RunFile(t, file, setup(t))
		})
	}
}

// RunFile runs one script file with the given handlers.
func RunFile(t *testing.T, file string, cmds Commands) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runText(t, file, string(data), cmds, *rewrite)
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite && out != string(data) {
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// block is one parsed command with where its output sits in the file.
type block struct {
	c        Case
	want     string
	sep, end int // lines [sep, end) hold "----", the output and any closing separators
}

// parse splits a script into blocks.
func parse(file string, lines []string) ([]block, error) {
	var blocks []block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		b := block{c: Case{File: file, Line: i + 1, Text: l, Cmd: f[0], Fields: f[1:]}}
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			if strings.TrimSpace(lines[i]) == "" {
				return nil, fmt.Errorf("%s:%d: %q not followed by ----", file, b.c.Line, l)
			}
			b.c.input = append(b.c.input, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: %q not followed by ----", file, b.c.Line, l)
		}
		b.sep = i
		var want []string
		if i+1 < len(lines) && lines[i+1] == "----" {
			// Doubled separators: the output ends at "----" "----".
			for i += 2; ; i++ {
				if i+1 >= len(lines) {
					return nil, fmt.Errorf("%s:%d: output opened with ----/---- never closed", file, b.c.Line)
				}
				if lines[i] == "----" && lines[i+1] == "----" {
					i += 2
					break
				}
				want = append(want, lines[i])
			}
		} else {
			for i++; i < len(lines) && lines[i] != ""; i++ {
				want = append(want, lines[i])
			}
		}
		b.want, b.end = strings.Join(want, "\n"), i
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// runText runs a script's text and returns it with each block's output
// replaced by the actual one. Mismatches are reported with t.Errorf unless
// rewriting.
func runText(t testing.TB, file, text string, cmds Commands, rewriting bool) (string, error) {
	t.Helper()
	lines := strings.Split(text, "\n")
	blocks, err := parse(file, lines)
	if err != nil {
		return "", err
	}
	var out []string
	last := 0
	for _, b := range blocks {
		c := b.c
		c.T = t
		h, ok := cmds[c.Cmd]
		if !ok {
			return "", fmt.Errorf("%s:%d: unknown command %q", file, c.Line, c.Cmd)
		}
		got := strings.TrimRight(h(&c), "\n")
		if len(c.input) > 0 && !c.inputRead {
			return "", fmt.Errorf("%s:%d: %s takes no input lines", file, c.Line, c.Cmd)
		}
		if !rewriting && got != b.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, c.Line, c.Text, got, b.want)
		}
		out = append(out, lines[last:b.sep]...)
		if got != "" && strings.Contains("\n"+got+"\n", "\n\n") {
			out = append(out, "----", "----", got, "----", "----")
		} else {
			out = append(out, "----", got)
			if got == "" {
				out = out[:len(out)-1]
			}
		}
		last = b.end
	}
	out = append(out, lines[last:]...)
	return strings.Join(out, "\n"), nil
}
