package e2e

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/segment"
)

// goAllocatedKiB reads go_memstats_alloc_bytes_total (bytes the broker's
// Go heap ever allocated) from its /metrics: the difference across a
// probe is what the probe made it allocate, however briefly held.
func goAllocatedKiB(t *testing.T, metrics string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "go_memstats_alloc_bytes_total" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return int64(v) >> 10
		}
	}
	t.Fatal("no go_memstats_alloc_bytes_total from the metrics listener")
	return 0
}

// zstdBomb is issue 19's decompression probe: a zstd batch of n minimal
// keyed records (8 bytes each decompressed), claiming n records, which
// compresses to a few KB; its CRC is broken when badCRC.
func zstdBomb(t *testing.T, n int, badCRC bool) []byte {
	t.Helper()
	rec := []byte{0, 0, 0, 2, 'k', 0, 0}
	area := make([]byte, 0, n*(len(rec)+1))
	for i := 0; i < n; i++ {
		area = binary.AppendVarint(area, int64(len(rec)))
		area = append(area, rec...)
	}
	body, err := segment.Compress(segment.CodecZstd, area)
	if err != nil {
		t.Fatal(err)
	}
	h := segment.Header{Attributes: segment.CodecZstd, LastOffsetDelta: int32(n - 1), NumRecords: int32(n),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli()}
	b := segment.AppendBatch(nil, h, body)
	if badCRC {
		b[segment.OffCRC] ^= 0xff
	}
	return b
}

// produceRaw sends one Produce v9 of batch to topic/0 and returns the
// partition's error code.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestDecompressionProbe: issue 19's 1,618-byte zstd batch to a compacted
// topic made the broker allocate 235 MiB before its CRC and size were
// checked (the key check decompressed first, and sized its record array
// from the claimed count). Now a bad CRC is CORRUPT_MESSAGE before
// anything is decompressed, and records that decompress past
// 32 x max.message.bytes are MESSAGE_TOO_LARGE; the broker logs each and
// its records are intact.
func TestDecompressionProbe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	metrics := freeAddr(t)
	b := startBroker(t, "", "--set", "metrics.listener="+metrics)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 9) // Produce by topic name
	cl := b.client(kgo.MaxVersions(versions))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	compact := "compact"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "keys"); err != nil || resp.Err != nil {
		t.Fatalf("create keys: %v %v", err, resp.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "keys", Key: []byte("a"), Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	const probes = 8
	cases := []struct {
		name   string
		batch  []byte
		want   int16
		budget int64 // KiB allocated per probe
	}{
		// The probe: 2M records, 16 MiB decompressed, CRC broken.
		{"bad CRC", zstdBomb(t, 2<<20, true), kerr.CorruptMessage.Code, 4 << 10},
		// 5M records, 40 MiB decompressed: past the 32 MiB limit.
		{"too large decompressed", zstdBomb(t, 5<<20, false), kerr.MessageTooLarge.Code, 4 << 10},
	}
	for _, c := range cases {
		before := goAllocatedKiB(t, metrics)
		for i := 0; i < probes; i++ {
			if code := produceRaw(t, cl, "keys", c.batch); code != c.want {
				t.Errorf("%s: error %v, want %v", c.name, kerr.ErrorForCode(code), kerr.ErrorForCode(c.want))
			}
		}
		per := (goAllocatedKiB(t, metrics) - before) / probes
		t.Logf("%s: a %d-byte batch; the broker allocated %d KiB per probe", c.name, len(c.batch), per)
		if per > c.budget {
			t.Errorf("%s: %d KiB allocated per probe, budget %d KiB", c.name, per, c.budget)
		}
	}
	// A batch within the limit (2M records, 16 MiB) is accepted and costs
	// about its records area, not 2M parsed records (about 200 MiB).
	before := goAllocatedKiB(t, metrics)
	if code := produceRaw(t, cl, "keys", zstdBomb(t, 2<<20, false)); code != 0 {
		t.Fatalf("2M keyed records within the limit: %v", kerr.ErrorForCode(code))
	}
	per := goAllocatedKiB(t, metrics) - before
	t.Logf("accepted: 2M keyed records (16 MiB decompressed) allocated %d KiB", per)
	if per > 48<<10 {
		t.Errorf("accepting 16 MiB of records allocated %d KiB", per)
	}

	b.alive(t)
	for _, want := range []string{"produce refused", "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE"} {
		if !strings.Contains(b.logText(), want) {
			t.Errorf("no %q in the broker's log", want)
		}
	}
	// The record written before is intact.
	rc, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics("keys"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for ctx.Err() == nil {
		fs := rc.PollFetches(ctx)
		var first *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if first == nil {
				first = r
			}
		})
		if first != nil {
			if string(first.Value) != "before" || first.Offset != 0 {
				t.Fatalf("first record %q at %d", first.Value, first.Offset)
			}
			return
		}
	}
	t.Fatal("the record produced before the probes was not read back")
}
