package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseWorkloadFile(t *testing.T) {
	src := `
# comment
name: mine
kind: produce
topics: 2
partitionsPerTopic: 8   # trailing comment
messageSize: 100
numRecords: 1_000_000
producerRate: 50000
duration: 30s
acks: -1
compression: zstd
linger: 5ms
batchSize: 65536
keys: 10
producersPerTopic: 2
consumerGroups: true
replicationFactor: 3
`
	w, err := ParseWorkload(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultWorkload()
	want.Name, want.Kind, want.Topics, want.Partitions, want.RecordSize = "mine", KindProduce, 2, 8, 100
	want.NumRecords, want.Rate, want.Duration, want.Acks, want.Compression = 1000000, 50000, 30*time.Second, "all", "zstd"
	want.Linger, want.BatchSize, want.Keys, want.ProducersPerTopic = 5*time.Millisecond, 65536, 10, 2
	want.ConsumerGroups, want.ReplicationFactor = true, 3
	if w != want {
		t.Errorf("got  %+v\nwant %+v", w, want)
	}
}

func TestParseWorkloadOMBDefaultsAndAcks(t *testing.T) {
	w, err := ParseWorkload(strings.NewReader("name: x\ntestDurationMinutes: 0.5\nacks: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != KindE2E || w.Duration != 30*time.Second || w.Idempotence {
		t.Errorf("OMB file: kind %s duration %v idempotence %v; want e2e, 30s, off with acks=1", w.Kind, w.Duration, w.Idempotence)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	cases := map[string]string{
		"no colon":        "name x\nduration: 1s\n",
		"unknown key":     "duration: 1s\nbogus: 1\n",
		"twice":           "duration: 1s\nduration: 2s\n",
		"bad int":         "duration: 1s\ntopics: many\n",
		"bad duration":    "duration: soon\n",
		"no end":          "kind: produce\n",
		"bad kind":        "kind: x\nduration: 1s\n",
		"zero partitions": "duration: 1s\npartitionsPerTopic: 0\n",
		"huge record":     "duration: 1s\nmessageSize: 999999999\n",
		"e2e tiny record": "duration: 1s\nmessageSize: 4\n",
		"idem acks":       "duration: 1s\nacks: 1\nidempotence: true\n",
		"bad codec":       "duration: 1s\ncompression: brotli\n",
		"consume no n":    "kind: consume\nduration: 1s\n",
		"too many":        "duration: 1s\ntopics: 100\nproducersPerTopic: 100\n",
		"negative rate":   "duration: 1s\nproducerRate: -5\n",
		"replication 99":  "duration: 1s\nreplicationFactor: 99\n",
	}
	for name, src := range cases {
		_, err := ParseWorkload(strings.NewReader(src))
		if !errors.Is(err, ErrWorkload) {
			t.Errorf("%s: err = %v, want ErrWorkload", name, err)
		}
	}
}

// The workload files shipped in workloads/ parse.
func TestShippedWorkloadsParse(t *testing.T) {
	files, _ := filepath.Glob("workloads/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d workload files", len(files))
	}
	for _, f := range files {
		if _, err := readWorkloadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := readWorkloadFile(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, ErrUsage) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, []byte(strings.Repeat("# padding\n", maxWorkloadFile/10+10)+"bogus: 1\n"), 0o644)
	if _, err := readWorkloadFile(big); err == nil {
		t.Error("a file over the limit is read no further: want the no-duration error")
	}
}
