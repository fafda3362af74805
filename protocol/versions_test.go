package protocol

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A real client pinned to older brokers' versions produces and consumes:
// 0.11 (the oldest with magic-2 batches: Produce v3, Fetch v5, Metadata v4)
// through 2.1, 3.0 and 4.1.
func TestOldClientVersionsRoundTrip(t *testing.T) {
	c := newCluster(t, nil)
	for _, vs := range []struct {
		name string
		v    *kversion.Versions
	}{
		{"0.11", kversion.V0_11_0()}, {"2.1", kversion.V2_1_0()}, {"3.0", kversion.V3_0_0()}, {"4.1", kversion.V4_1_0()},
	} {
		t.Run(vs.name, func(t *testing.T) {
			topic := "ver-" + strings.ReplaceAll(vs.name, ".", "-")
			c.createTopic(topic, 2)
			ctx := testCtx(t)
			opts := []kgo.Opt{kgo.MaxVersions(vs.v), kgo.DefaultProduceTopic(topic)}
			prod := c.client(opts...)
			const n = 50
			for i := range n {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cons := c.client(kgo.MaxVersions(vs.v), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
			got := 0
			for got < n {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of %d", got, n)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s/%d: %v", tp, p, err) })
				got += fs.NumRecords()
			}
		})
	}
}
