package retention

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The policy functions are tested with scripts in testdata/, in the shape
// of etcd raft's and pebble's data-driven tests: a command line with
// key=value arguments, input lines, "----", the expected output, a blank
// line. Lines starting with # are comments.
//
// If a script test fails, run `go test ./retention -rewrite` and inspect
// the diff. Only commit the changes if you understand what caused them.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the testdata scripts")

// scriptCase is one command of a script.
type scriptCase struct {
	line  int // of the command, for messages
	cmd   string
	args  map[string]string
	input []string
	want  string
}

func parseScript(t *testing.T, path string) (cases []scriptCase, comments map[int][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	comments = map[int][]string{} // comments before case i
	sc := bufio.NewScanner(f)
	n := 0
	var cur *scriptCase
	inWant := false
	var want []string
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && (strings.HasPrefix(line, "#") || strings.TrimSpace(line) == ""):
			comments[len(cases)] = append(comments[len(cases)], line)
		case cur == nil:
			fields := strings.Fields(line)
			cur = &scriptCase{line: n, cmd: fields[0], args: map[string]string{}}
			for _, a := range fields[1:] {
				k, v, _ := strings.Cut(a, "=")
				cur.args[k] = v
			}
		case !inWant && line == "----":
			inWant = true
		case !inWant:
			cur.input = append(cur.input, line)
		case strings.TrimSpace(line) == "":
			cur.want = strings.Join(want, "\n")
			cases = append(cases, *cur)
			cur, inWant, want = nil, false, nil
		default:
			want = append(want, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		cur.want = strings.Join(want, "\n")
		cases = append(cases, *cur)
	}
	return cases, comments
}

// runScripts runs every testdata file matching glob through run.
func runScripts(t *testing.T, glob string, run func(t *testing.T, c scriptCase) string) {
	paths, err := filepath.Glob(filepath.Join("testdata", glob))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts match %s: %v", glob, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases, comments := parseScript(t, path)
			var out strings.Builder
			for i, c := range cases {
				got := strings.TrimRight(run(t, c), "\n")
				if !*rewrite && got != c.want {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, got, c.want)
				}
				for _, l := range comments[i] {
					out.WriteString(l + "\n")
				}
				fields := []string{c.cmd}
				for _, k := range sortedKeys(c.args) {
					if c.args[k] == "" {
						fields = append(fields, k)
					} else {
						fields = append(fields, k+"="+c.args[k])
					}
				}
				fmt.Fprintf(&out, "%s\n", strings.Join(fields, " "))
				for _, l := range c.input {
					out.WriteString(l + "\n")
				}
				fmt.Fprintf(&out, "----\n%s\n", got)
				if i < len(cases)-1 {
					out.WriteString("\n")
				}
			}
			for _, l := range comments[len(cases)] {
				out.WriteString(l + "\n")
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// intArg parses an integer argument, def when absent.
func intArg(t *testing.T, c scriptCase, key string, def int64) int64 {
	t.Helper()
	v, ok := c.args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("line %d: %s=%q: %v", c.line, key, v, err)
	}
	return n
}
