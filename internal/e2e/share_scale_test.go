package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestShareGroupManyPartitions: one share group on a topic of 120
// partitions at replication factor 3 on three brokers (360 partition
// replicas, each share partition's state replicated with it), three
// franz-go workers accepting everything. Half way through, one broker is
// SIGKILLed (the leaders of about a third of the share partitions move)
// and restarted. Every record produced is delivered, none after its
// acceptance was confirmed, and the group ends with lag 0 on every
// partition. Long form (STRATA_SHARE_SCALE_LONG=1): 400 partitions and
// more records.
func TestShareGroupManyPartitions(t *testing.T) {
	st, c := shareCluster(t)
	parts, records := int32(120), 3000
	if os.Getenv("STRATA_SHARE_SCALE_LONG") != "" {
		parts, records = 400, 20000
	}
	const topic, group = "many", "many-workers"
	createShareTopic(t, st, topic, parts)
	admCl := st.client()
	adm := kadm.NewClient(admCl)
	c.waitLeaders(context.Background(), adm, topic, parts, 2*time.Minute)
	setGroupConfigs(t, admCl, group, "share.auto.offset.reset", "earliest")

	ledger := newShareLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	workers := make([]*shareWorker, 3)
	for i := range workers {
		w := newShareWorker(t, fmt.Sprintf("mw%d", i), st.seeds, group, topic, ledger)
		// A failover may hand a record to another worker while its first
		// holder's lock still runs on the dead leader's clock.
		w.released = func(shareKey) bool { return true }
		workers[i] = w
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	prod := st.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produced := produceSeq(t, prod, topic, records/2)

	delivered := func() int {
		d, _ := ledger.counts()
		return d
	}
	testwait.For(t, 2*time.Minute, func() bool { return delivered() >= records/4 }, "a quarter of the %d records delivered", records)
	ls := c.waitLeaders(context.Background(), adm, topic, parts, 30*time.Second)
	victim := c.node(ls[0][0])
	led := 0
	for _, le := range ls {
		if le[0] == victim.id {
			led++
		}
	}
	t.Logf("SIGKILL broker %d (leader of %d of %d share partitions) at %d records delivered", victim.id, led, parts, delivered())
	victim.kill()
	for p, n := range produceSeq(t, prod, topic, records/2) {
		produced[p] += n
	}
	victim.start()
	victim.waitReady(60 * time.Second)

	waitShareDone(t, adm, group, topic, int(parts), 3*time.Minute)
	cancel()
	wg.Wait()
	ledger.check(t)
	total := 0
	for _, n := range produced {
		total += n
	}
	got, confirmed := ledger.counts()
	if got < total {
		t.Errorf("%d distinct records delivered, %d produced", got, total)
	}
	if len(produced) != int(parts) {
		t.Errorf("records went to %d of %d partitions, want all", len(produced), parts)
	}
	t.Logf("%d partitions: %d records produced, %d delivered, %d acceptances confirmed", parts, total, got, confirmed)
}
