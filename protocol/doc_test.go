package protocol

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// docAPIList renders the registry as doc.go lists it.
func docAPIList() []string {
	lines := []string{fmt.Sprintf("%3s %-32s %-8s %-10s %s", "key", "API", "versions", "order", "file")}
	for _, k := range registered() {
		r := apis[k]
		ord := "concurrent"
		if r.barrier {
			ord = "barrier"
		}
		lines = append(lines, fmt.Sprintf("%3d %-32s %-8s %-10s %s", k, kmsg.NameForKey(k), fmt.Sprintf("%d-%d", r.min, r.max), ord, r.file))
	}
	return lines
}

// TestDocListsEveryAPI: the API list in doc.go is the registry's: every
// API with its versions, order and file, nothing more.
func TestDocListsEveryAPI(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	in := false
	for _, l := range strings.Split(string(src), "\n") {
		body, isList := strings.CutPrefix(l, "//\t")
		switch {
		case isList && strings.HasPrefix(strings.TrimSpace(body), "key "):
			in = true
			got = append(got, strings.TrimRight(body, " "))
		case in && isList:
			got = append(got, strings.TrimRight(body, " "))
		case in:
			in = false
		}
	}
	want := docAPIList()
	for i := range want {
		want[i] = strings.TrimRight(want[i], " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("doc.go's API list differs from the registry; it should read:\n//\t%s", strings.Join(want, "\n//\t"))
	}
}
