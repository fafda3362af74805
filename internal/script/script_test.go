package script

import (
	"fmt"
	"strings"
	"testing"
)

func counter(t *testing.T) Commands {
	n := int64(0)
	return Commands{
		// add [by=N]: adds N (default 1), prints the total
		"add": func(c *Case) string {
			n += c.Int("by", 1)
			return fmt.Sprint(n)
		},
		// show NAME...: prints each name with the total
		"show": func(c *Case) string {
			var out []string
			for _, name := range c.Pos() {
				out = append(out, fmt.Sprintf("%s=%d", name, n))
			}
			return strings.Join(out, "\n")
		},
		// sum, then numbers one a line: prints their sum, a blank line, their count
		"sum": func(c *Case) string {
			var s int64
			for _, l := range c.Input() {
				var v int64
				fmt.Sscan(l, &v)
				s += v
			}
			return fmt.Sprintf("%d\n\n(%d lines)", s, len(c.Input()))
		},
		// quiet: prints nothing
		"quiet": func(c *Case) string { return "" },
	}
}

func TestCounter(t *testing.T) { Run(t, "testdata/*.txt", counter) }

// recorder collects the errors a script reports, in place of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

func TestMismatchAndRewrite(t *testing.T) {
	text := "# head\nadd\n----\n1\n\nadd by=2\n----\n4\n\n# tail\nsum\n3\n----\n3\n"
	r := &recorder{TB: t}
	out, err := runText(r, "f.txt", text, counter(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.errs) != 2 || !strings.HasPrefix(r.errs[0], "f.txt:6: add by=2\ngot:\n3\nwant:\n4") || !strings.HasPrefix(r.errs[1], "f.txt:11: sum") {
		t.Fatalf("errors %q", r.errs)
	}
	want := "# head\nadd\n----\n1\n\nadd by=2\n----\n3\n\n# tail\nsum\n3\n----\n----\n3\n\n(1 lines)\n----\n----\n"
	if out != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", out, want)
	}
	// The rewritten text passes, and rewrites to itself.
	r = &recorder{TB: t}
	again, err := runText(r, "f.txt", out, counter(t), false)
	if err != nil || len(r.errs) != 0 || again != out {
		t.Fatalf("second run: %v %q\n%s", err, r.errs, again)
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct{ text, err string }{
		{"add\n\n", `f.txt:1: "add" not followed by ----`},
		{"# c\nadd\n1\n", `f.txt:2: "add" not followed by ----`},
		{"nope\n----\n", `f.txt:1: unknown command "nope"`},
		{"add\n1\n----\n1\n", `f.txt:1: add takes no input lines`},
		{"sum\n----\n----\n1\n", `f.txt:1: output opened with ----/---- never closed`},
	} {
		_, err := runText(&recorder{TB: t}, "f.txt", tc.text, counter(t), false)
		if err == nil || err.Error() != tc.err {
			t.Errorf("%q: error %v, want %s", tc.text, err, tc.err)
		}
	}
}
