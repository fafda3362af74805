package protocol

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
)

// testBroker opens a real log.Manager and replication.Broker in a temp dir.
func testBroker(t testing.TB, mod func(*replication.BrokerConfig)) *replication.Broker {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg := replication.BrokerConfig{
		NodeID:                   1,
		AdvertisedHost:           "127.0.0.1",
		AdvertisedPort:           9092,
		DataDir:                  dir,
		NumPartitions:            1,
		DefaultReplicationFactor: 1,
		AutoCreateTopics:         true,
		DeleteTopicEnable:        true,
		Logger:                   quiet,
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := replication.NewBroker(cfg, logs)
	if err != nil {
		logs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testCluster is one broker serving on 127.0.0.1.
type testCluster struct {
	t      testing.TB
	b      *replication.Broker
	s      *Server
	addr   string
	broker *replication.Broker
}

func newCluster(t testing.TB, mod func(*replication.BrokerConfig)) *testCluster {
	t.Helper()
	// The advertised port must be the listener's, so the broker is
	// created after the listener's port is known.
	var port int32
	var b *replication.Broker
	s, addr := startServerWith(t, Config{}, func(p int32) *replication.Broker {
		port = p
		b = testBroker(t, func(c *replication.BrokerConfig) {
			c.AdvertisedPort = port
			if mod != nil {
				mod(c)
			}
		})
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(c.addr),
		kgo.RetryTimeout(10 * time.Second),
		kgo.WithLogger(kgo.BasicLogger(io.Discard, kgo.LogLevelNone, nil)),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) admin() *kadm.Client {
	return kadm.NewClient(c.client())
}

func (c *testCluster) createTopic(name string, partitions int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.admin().CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil || resp.Err != nil {
		c.t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recordSpec is one record for makeBatch.
type recordSpec struct {
	key, value []byte
	tsDelta    int64
}

// batchOpts are the producer fields of a batch.
type batchOpts struct {
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	firstTS       int64
	attrs         int16
}

// makeBatch builds an uncompressed v2 record batch with a valid CRC.
func makeBatch(o batchOpts, recs ...recordSpec) []byte {
	if o.producerID == 0 && o.producerEpoch == 0 && o.baseSequence == 0 {
		o.producerID, o.producerEpoch, o.baseSequence = -1, -1, -1
	}
	if o.firstTS == 0 {
		o.firstTS = time.Now().UnixMilli()
	}
	var body []byte
	var maxTS int64 = o.firstTS
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.tsDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.key)))
			rec = append(rec, r.key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
		maxTS = max(maxTS, o.firstTS+r.tsDelta)
	}
	return segment.AppendBatch(nil, segment.Header{Attributes: o.attrs, LastOffsetDelta: int32(max(len(recs)-1, 0)),
		BaseTimestamp: o.firstTS, MaxTimestamp: maxTS, ProducerID: o.producerID, ProducerEpoch: o.producerEpoch,
		BaseSequence: o.baseSequence, NumRecords: int32(len(recs))}, body)
}

// recrc recomputes a batch's CRC after a test edits it.
func recrc(b []byte) []byte {
	segment.SetCRC(b)
	return b
}

func values(n int, prefix string) []recordSpec {
	out := make([]recordSpec, n)
	for i := range out {
		out[i] = recordSpec{value: []byte(prefix + strconv.Itoa(i))}
	}
	return out
}
