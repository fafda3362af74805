package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestShareRedeliveryBackoffFailover: delayed redelivery
// (strata.share.redelivery.backoff.*) survives a SIGKILL of the share
// partition's leader on 3 brokers: a record released just before the
// kill is not delivered again, by the new leader, before its backoff
// (15 s, far longer than a failover) has passed since the release, and
// comes back with delivery count 2.
func TestShareRedeliveryBackoffFailover(t *testing.T) {
	st, c := shareCluster(t)
	createShareTopic(t, st, "slow", 1)
	admCl := st.client()
	adm := kadm.NewClient(admCl)
	const backoff = 15 * time.Second
	setGroupConfigs(t, admCl, "patient", "share.auto.offset.reset", "earliest",
		"strata.share.redelivery.backoff.initial.ms", "15000", "strata.share.redelivery.backoff.multiplier", "1")
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := admCl.ProduceSync(pctx, &kgo.Record{Topic: "slow", Value: []byte("job")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pcancel()
	cl := c.client(kgo.ShareGroup("patient"), kgo.ConsumeTopics("slow"), kgo.ClientID("patient-w"))
	deliveries := func(limit time.Duration) *kgo.Record {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 10)
			if rs := fs.Records(); len(rs) > 0 {
				if len(rs) != 1 {
					t.Fatalf("%d records, want the one", len(rs))
				}
				return rs[0]
			}
		}
		t.Fatalf("no delivery within %v", limit)
		return nil
	}

	r := deliveries(60 * time.Second)
	if r.DeliveryCount() != 1 {
		t.Fatalf("first delivery with count %d", r.DeliveryCount())
	}
	released := time.Now() // before the broker applies the release: the backoff runs from a later instant
	r.Ack(kgo.AckRelease)
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := cl.FlushAcks(fctx)
	fcancel()
	if err != nil {
		t.Fatalf("release not confirmed: %v", err)
	}
	leaders := c.waitLeaders(context.Background(), adm, "slow", 1, 30*time.Second)
	victim := leaders[0][0]
	c.node(victim).kill()
	killed := time.Now()
	t.Logf("released at +0, SIGKILL broker %d (leader of slow-0) at +%v", victim, killed.Sub(released).Round(time.Millisecond))
	// Another broker leads (a higher epoch) before the backoff has
	// passed: the wait is then its to keep.
	testwait.For(t, 60*time.Second, func() bool {
		now, err := c.partitionLeaders(context.Background(), adm, "slow")
		l, ok := now[0]
		if err != nil || !ok || l[1] <= leaders[0][1] || l[0] < 0 || l[0] == victim {
			return false
		}
		el := time.Since(released)
		t.Logf("new leader %d (epoch %d) at +%v", l[0], l[1], el.Round(time.Millisecond))
		if el >= backoff {
			t.Logf("the failover took longer than the backoff: this run proves less")
		}
		return true
	}, "no new leader of slow-0 within 60 s")
	c.node(victim).start() // back, as a follower

	r = deliveries(2*backoff + 60*time.Second)
	got := time.Since(released)
	if r.DeliveryCount() != 2 {
		t.Errorf("redelivered with count %d, want 2", r.DeliveryCount())
	}
	if got < backoff {
		t.Fatalf("redelivered %v after the release, before its %v backoff: the new leader lost the wait", got, backoff)
	}
	t.Logf("redelivered at +%v (backoff %v)", got.Round(time.Millisecond), backoff)
	r.Ack(kgo.AckAccept)
	fctx, fcancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	if err := cl.FlushAcks(fctx); err != nil {
		t.Fatalf("accept: %v", err)
	}
	waitShareDone(t, adm, "patient", "slow", 1, 60*time.Second)
}
