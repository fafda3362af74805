package replication

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestMetaProperties(t *testing.T) {
	dir := t.TempDir()
	mp, err := loadOrCreateMetaProperties(segment.OSFS{}, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(mp.ClusterID) != 22 || strings.HasPrefix(mp.ClusterID, "-") || mp.NodeID != 3 {
		t.Fatalf("%+v", mp)
	}
	again, err := loadOrCreateMetaProperties(segment.OSFS{}, dir, 3)
	if err != nil || again != mp {
		t.Fatalf("reload: %+v %v", again, err)
	}
	_, err = loadOrCreateMetaProperties(segment.OSFS{}, dir, 4)
	if !errors.Is(err, ErrMetaProperties) || !strings.Contains(err.Error(), "node.id=3") || !strings.Contains(err.Error(), "node.id=4") {
		t.Fatalf("mismatch: %v", err)
	}
	for _, bad := range []string{"version=1\nnode.id=3\n", "version=2\ncluster.id=x\nnode.id=3\n", "garbage\n", "version=1\ncluster.id=x\nnode.id=-1\n"} {
		os.WriteFile(filepath.Join(dir, metaPropertiesName), []byte(bad), 0o644)
		if _, err := loadOrCreateMetaProperties(segment.OSFS{}, dir, 3); !errors.Is(err, ErrMetaProperties) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestRandomUUID(t *testing.T) {
	seen := map[[16]byte]bool{}
	for i := 0; i < 1000; i++ {
		u := randomUUID()
		if u == ([16]byte{}) || seen[u] || u[6]>>4 != 4 {
			t.Fatalf("bad uuid %x", u)
		}
		seen[u] = true
	}
}
