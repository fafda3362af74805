package replication

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitsKeepTheirFiles holds the package's layout (doc.go, "Units"):
// the metadata quorum's methods (and the image's) live in metadata_*.go,
// the partition replicas' (and their groups') in partition_*.go, the
// shared node's in node.go, and the façade's in neither; no metadata_*.go
// file names the replicas' types, so the quorum reaches them only through
// replicaEffects.
func TestUnitsKeepTheirFiles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]func(file string) bool{
		"metadataQuorum":    func(f string) bool { return strings.HasPrefix(f, "metadata_") },
		"image":             func(f string) bool { return strings.HasPrefix(f, "metadata_") },
		"partitionReplicas": func(f string) bool { return strings.HasPrefix(f, "partition_") },
		"partitionGroup":    func(f string) bool { return strings.HasPrefix(f, "partition_") },
		"node":              func(f string) bool { return f == "node.go" },
		"Broker": func(f string) bool {
			return !strings.HasPrefix(f, "metadata_") && !strings.HasPrefix(f, "partition_")
		},
	}
	replicaTypes := map[string]bool{"partitionReplicas": true, "partitionGroup": true}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			id, ok := typ.(*ast.Ident)
			if !ok {
				continue
			}
			if in, ok := want[id.Name]; ok {
				checked++
				if !in(name) {
					t.Errorf("%s: method %s.%s is in the wrong unit's file", name, id.Name, fd.Name.Name)
				}
			}
		}
		if strings.HasPrefix(name, "metadata_") {
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && replicaTypes[id.Name] {
					t.Errorf("%s: the metadata quorum names %s (%s); it reaches the replicas through replicaEffects",
						name, id.Name, fset.Position(id.Pos()))
				}
				return true
			})
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d methods: did the package move?", checked)
	}
}
