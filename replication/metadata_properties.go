package replication

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/segment"
)

// meta.properties identifies a data directory, as in Kafka: written once at
// first start, checked at every later start so that a directory is never
// served by a broker with another node.id (its partitions and metadata
// belong to that node).
//
//	#
//	# Written by strata at first start; do not edit.
//	version=1
//	cluster.id=<22 characters: a random UUID, base64url, no padding>
//	node.id=<node.id>

const (
	metaPropertiesName     = "meta.properties"
	maxMetaPropertiesBytes = 64 << 10
)

// ErrMetaProperties reports a missing, unreadable or mismatched
// meta.properties.
var ErrMetaProperties = errors.New("replication: meta.properties")

type metaProperties struct {
	Version   int
	ClusterID string
	NodeID    int32
}

// loadOrCreateMetaProperties returns the data dir's identity, writing a new
// one (with a fresh cluster ID) if the file does not exist, and failing if
// it names another node.
func loadOrCreateMetaProperties(fsys segment.FS, dir string, nodeID int32) (metaProperties, error) {
	return loadOrCreateMetaPropertiesWithID(fsys, dir, nodeID, "")
}

// votersClusterID is the cluster.id every voter of a multi-voter quorum
// derives from the voter list at first start (as if each were formatted
// with the same --cluster-id), so their Metadata answers agree. "" for a
// lone broker (a random id).
func votersClusterID(voters []Voter) string {
	if len(voters) < 2 {
		return ""
	}
	vs := append([]Voter(nil), voters...)
	sort.Slice(vs, func(i, j int) bool { return vs[i].NodeID < vs[j].NodeID })
	h := sha256.New()
	h.Write([]byte("strata-cluster-id\x00"))
	for _, v := range vs {
		fmt.Fprintf(h, "%d@%s,", v.NodeID, v.Addr)
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	s := base64.RawURLEncoding.EncodeToString(u[:])
	if strings.HasPrefix(s, "-") {
		s = "S" + s[1:] // Kafka rejects ids starting with '-'
	}
	return s
}

// loadOrCreateMetaPropertiesWithID is loadOrCreateMetaProperties with the
// cluster.id to write at creation ("" = random).
func loadOrCreateMetaPropertiesWithID(fsys segment.FS, dir string, nodeID int32, newID string) (metaProperties, error) {
	path := filepath.Join(dir, metaPropertiesName)
	data, err := readFileLimited(fsys, path, maxMetaPropertiesBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if newID == "" {
			newID = randomUUIDString()
		}
		mp := metaProperties{Version: 1, ClusterID: newID, NodeID: nodeID}
		return mp, writeMetaProperties(fsys, dir, mp)
	}
	if err != nil {
		return metaProperties{}, fmt.Errorf("%w: read %s: %v", ErrMetaProperties, path, err)
	}
	mp, err := parseMetaProperties(data)
	if err != nil {
		return metaProperties{}, fmt.Errorf("%w: %s: %v", ErrMetaProperties, path, err)
	}
	if mp.NodeID != nodeID {
		return metaProperties{}, fmt.Errorf("%w: %s has node.id=%d but this broker is configured with node.id=%d; "+
			"the data directory belongs to another node (use that node.id, or another log.dirs)", ErrMetaProperties, path, mp.NodeID, nodeID)
	}
	return mp, nil
}

func parseMetaProperties(data []byte) (metaProperties, error) {
	var mp metaProperties
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return mp, fmt.Errorf("malformed line %q", line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		seen[k] = true
		switch k {
		case "version":
			n, err := strconv.Atoi(v)
			if err != nil || n != 1 {
				return mp, fmt.Errorf("unsupported version %q", v)
			}
			mp.Version = n
		case "cluster.id":
			if v == "" {
				return mp, errors.New("empty cluster.id")
			}
			mp.ClusterID = v
		case "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				return mp, fmt.Errorf("invalid node.id %q", v)
			}
			mp.NodeID = int32(n)
		}
	}
	for _, k := range []string{"version", "cluster.id", "node.id"} {
		if !seen[k] {
			return mp, fmt.Errorf("missing %s", k)
		}
	}
	return mp, nil
}

// writeMetaProperties writes the file atomically: temp file, fsync, rename,
// fsync the directory.
func writeMetaProperties(fsys segment.FS, dir string, mp metaProperties) error {
	body := fmt.Sprintf("#\n# Written by strata at first start; do not edit.\nversion=%d\ncluster.id=%s\nnode.id=%d\n",
		mp.Version, mp.ClusterID, mp.NodeID)
	if err := segment.ReplaceFile(fsys, filepath.Join(dir, metaPropertiesName), []byte(body)); err != nil {
		return fmt.Errorf("%w: %v", ErrMetaProperties, err)
	}
	return nil
}

func readFileLimited(fsys segment.FS, path string, limit int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("file is %d bytes, more than %d", size, limit)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, err
	}
	return buf, nil
}

// randomUUID returns a random version-4 UUID that is never all zero and
// whose base64url form does not start with '-' (Kafka rerolls those too, so
// that IDs are never mistaken for command-line flags).
func randomUUID() [16]byte {
	for i := 0; i < 100; i++ {
		var u [16]byte
		if _, err := rand.Read(u[:]); err != nil {
			panic("replication: crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported platforms
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		if u != ([16]byte{}) && !strings.HasPrefix(base64.RawURLEncoding.EncodeToString(u[:]), "-") {
			return u
		}
	}
	panic("replication: no usable random UUID in 100 tries")
}

// randomUUIDString is randomUUID in Kafka's string form (base64url, 22 chars).
func randomUUIDString() string {
	u := randomUUID()
	return base64.RawURLEncoding.EncodeToString(u[:])
}
