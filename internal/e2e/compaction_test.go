package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestCompactionSurvivesSIGKILL runs a compacted topic under a steady
// update load while the cleaner compacts it every 20 ms, SIGKILLs the
// broker at a random moment (during a compaction or not), restarts it, and
// reads the topic back: every key's value is its last acknowledged one, or
// the result of a prefix of the one ProduceSync call in flight at the kill
// (franz-go may split a call's ten records over several batches and
// requests, one in flight at a time, so the broker may have stored the first
// of them and not the rest), offsets increase, and the records decode --
// several rounds on the same data directory.
func TestCompactionSurvivesSIGKILL(t *testing.T) {
	rng := rand.New(rand.NewSource(testwait.Seed(t)))
	b := startBroker(t, "", "--set", "log.cleaner.backoff.ms=20", "--set", "log.retention.check.interval.ms=50")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client())
	cfgs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"} {
		v := v
		cfgs[k] = &v
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, cfgs, "compacted"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	const keys = 40
	acked := map[string]string{} // last acknowledged value per key
	var inFlight []*kgo.Record   // the ProduceSync call in flight at the kill, in order
	seq := 0
	for round := 0; round < 3; round++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("compacted"),
			kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.RecordDeliveryTimeout(2*time.Second),
			kgo.ProducerLinger(0), kgo.DisableIdempotentWrite()) // idempotent records in flight at a kill are never failed
		if err != nil {
			t.Fatal(err)
		}
		killAt := time.Now().Add(time.Duration(200+rng.Intn(400)) * time.Millisecond)
		killed := make(chan struct{})
		go func() {
			time.Sleep(time.Until(killAt))
			b.kill()
			close(killed)
		}()
		for {
			// One batch of updates to ten keys at a time.
			var recs []*kgo.Record
			for i := 0; i < 10; i++ {
				seq++
				k := fmt.Sprintf("key-%02d", rng.Intn(keys))
				v := fmt.Sprintf("%s-v%d-%s", k, seq, "................................................")
				recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte(v)})
			}
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			err := cl.ProduceSync(pctx, recs...).FirstErr()
			pcancel()
			if err != nil {
				inFlight = recs
				break
			}
			for _, r := range recs {
				acked[string(r.Key)] = string(r.Value)
			}
		}
		<-killed
		cl.Close()
		b.start()

		// Read everything back: the last record of each key wins.
		hw, err := adm.ListEndOffsets(ctx, "compacted")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := hw.Lookup("compacted", 0)
		cons := b.client(kgo.ConsumeTopics("compacted"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := map[string]string{}
		last := int64(-1)
		for last < end.Offset-1 {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round %d: consuming to %d: at %d: %v", round, end.Offset, last, ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("round %d: fetch: %v", round, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset <= last {
					t.Fatalf("round %d: offset %d after %d", round, r.Offset, last)
				}
				last = r.Offset
				got[string(r.Key)] = string(r.Value)
			})
		}
		cons.Close()
		// The state must be the acknowledged one plus the first n records
		// of the call in flight, for some n.
		landed := -1
		for n := 0; n <= len(inFlight) && landed < 0; n++ {
			want := make(map[string]string, len(acked))
			for k, v := range acked {
				want[k] = v
			}
			for _, r := range inFlight[:n] {
				want[string(r.Key)] = string(r.Value)
			}
			if equalMaps(got, want) {
				landed, acked = n, want
			}
		}
		if landed < 0 {
			for k, v := range acked {
				if got[k] != v {
					t.Errorf("round %d: key %s = %q, last acknowledged %q", round, k, got[k], v)
				}
			}
			for i, r := range inFlight {
				t.Logf("round %d: in flight at the kill, record %d: %s = %q", round, i, r.Key, r.Value)
			}
			t.Fatalf("round %d: the topic is not the acknowledged state plus a prefix of the write in flight", round)
		}
		t.Logf("round %d: %d of the %d records in flight at the kill landed", round, landed, len(inFlight))
		t.Logf("round %d: %d updates so far, log end %d, %d keys", round, seq, end.Offset, len(got))
	}
	b.mu.Lock()
	out := b.logs.String()
	b.mu.Unlock()
	if !strings.Contains(out, "msg=compacted") {
		t.Fatal("the cleaner never compacted the topic")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestConsumerOffsetsCompacted: __consumer_offsets is created with
// cleanup.policy=compact and the cleaner compacts it like any topic: after
// a thousand commits of one group's offset its partition shrinks to a few
// segments, and after a restart the coordinator, replaying the compacted
// log, still answers the last committed offset.
func TestConsumerOffsetsCompacted(t *testing.T) {
	b := startBroker(t, "", "--set", "log.cleaner.backoff.ms=20", "--set", "offsets.topic.num.partitions=1",
		"--set", "offsets.topic.segment.bytes=1024")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client())
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "src"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	const commits = 1000
	for i := 1; i <= commits; i++ {
		var offs kadm.Offsets
		offs.AddOffset("src", 0, int64(i), -1)
		resps, err := adm.CommitOffsets(ctx, "g1", offs)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	dir := filepath.Join(b.dataDir, "__consumer_offsets-0")
	logBytes := func() int64 {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				if fi, err := e.Info(); err == nil {
					n += fi.Size()
				}
			}
		}
		return n
	}
	if !testwait.Until(20*time.Second, func() bool {
		b.mu.Lock()
		out := b.logs.String()
		b.mu.Unlock()
		return strings.Contains(out, "msg=compacted") && strings.Contains(out, "partition=__consumer_offsets-0") && logBytes() < 16<<10
	}) {
		t.Fatalf("__consumer_offsets-0 not compacted: %d bytes of segments", logBytes())
	}
	t.Logf("__consumer_offsets-0 holds %d bytes of segments after %d commits", logBytes(), commits)
	b.restart()
	adm = kadm.NewClient(b.client())
	fetched, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("src", 0); !ok || o.Err != nil || o.At != commits {
		t.Fatalf("committed offset after compaction and restart: %+v (found %v), want %d", o, ok, commits)
	}
}
