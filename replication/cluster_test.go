package replication

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
)

// testQuorum is three brokers in this process, each with its own data
// dir, Kafka address (not served here) and replication listener on
// 127.0.0.1, voters of one metadata quorum.
type testQuorum struct {
	t       *testing.T
	dirs    []string
	addrs   []string
	voters  []Voter
	brokers []*Broker
}

func newTestQuorum(t *testing.T) *testQuorum {
	t.Helper()
	q := &testQuorum{t: t}
	// The three ports are held open together until all are chosen (a port
	// closed at once can come back for the next: "found duplicate address
	// in configuration" under a loaded CI); each broker listens on its own
	// itself (start).
	var held []net.Listener
	for i := 0; i < 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		q.dirs = append(q.dirs, t.TempDir())
		q.addrs = append(q.addrs, ln.Addr().String())
		q.voters = append(q.voters, Voter{NodeID: int32(i + 1), Addr: ln.Addr().String()})
	}
	for _, ln := range held {
		ln.Close()
	}
	q.brokers = make([]*Broker, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs[i] = q.start(i) }(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, b := range q.brokers {
			if b != nil {
				b.Close()
			}
		}
	})
	return q
}

// start starts broker i (node id i+1) on its data dir.
func (q *testQuorum) start(i int) error {
	var ln net.Listener
	var err error
	// The port may still be held by the broker just stopped (bounded).
	if !testwait.Until(time.Second, func() bool {
		ln, err = net.Listen("tcp", q.addrs[i])
		return err == nil
	}) {
		return err
	}
	m, err := log.OpenManager(log.ManagerOptions{Dir: q.dirs[i], Logger: discardLogger()})
	if err != nil {
		ln.Close()
		return err
	}
	cfg := testConfig(q.dirs[i])
	cfg.NodeID = int32(i + 1)
	cfg.AdvertisedPort = int32(9092 + i)
	cfg.Voters = q.voters
	cfg.ReplicationListener = ln
	cfg.StartTimeout = 30 * time.Second
	if os.Getenv("DEBUGLOG") != "" { // DEBUGLOG=1 go test -v: the brokers log to stderr
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", i+1)
	}
	b, err := NewBroker(cfg, m)
	if err != nil {
		m.Close()
		return err
	}
	q.brokers[i] = b
	return nil
}

// controller waits until every running broker names the same controller
// and returns its index.
func (q *testQuorum) controller() int {
	q.t.Helper()
	var id int32
	testwait.For(q.t, 15*time.Second, func() bool {
		id = -2
		same := true
		for _, b := range q.brokers {
			if b == nil {
				continue
			}
			c := b.ControllerID()
			if c < 0 || (id != -2 && c != id) {
				same = false
			}
			id = c
		}
		return same && id > 0 && q.brokers[id-1] != nil
	}, "no agreed controller")
	return int(id - 1)
}

// waitTopic waits until broker i's replicated image has topic name.
func (q *testQuorum) waitTopic(i int, name string) TopicInfo {
	q.t.Helper()
	var t TopicInfo
	testwait.For(q.t, 10*time.Second, func() bool {
		var ok bool
		t, ok = q.brokers[i].Topic(name)
		return ok
	}, "broker %d never saw topic %s", i+1, name)
	return t
}

// The metadata quorum (KRaft's role): brokers register through it, any
// broker takes metadata writes (forwarded to the controller), every broker
// answers from its replicated image, and the quorum survives the loss of
// its controller.
func TestThreeBrokerMetadataQuorum(t *testing.T) {
	ctx := context.Background()
	q := newTestQuorum(t)
	ctl := q.controller()
	for i, b := range q.brokers {
		// The last registration may still be on its way.
		if !testwait.Until(2*time.Second, func() bool { return len(b.Brokers()) == 3 }) {
			t.Fatalf("broker %d sees %d registered brokers", i+1, len(b.Brokers()))
		}
		if b.ClusterID() != q.brokers[0].ClusterID() {
			t.Fatalf("broker %d: cluster id %s, broker 1: %s", i+1, b.ClusterID(), q.brokers[0].ClusterID())
		}
	}
	follower := (ctl + 1) % 3
	created, err := q.brokers[follower].CreateTopic(ctx, CreateTopicRequest{Name: "spread", NumPartitions: 6, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic on a non-controller broker: %v", err)
	}
	for i := range q.brokers {
		got := q.waitTopic(i, "spread")
		if got.ID != created.ID || len(got.Partitions) != 6 {
			t.Fatalf("broker %d: %+v", i+1, got)
		}
		// Each broker opened the logs of the partitions it leads, and only
		// those; produce works there and is refused elsewhere.
		for _, p := range got.Partitions {
			_, err := q.brokers[i].Produce(ctx, "spread", p.Partition, batch(1, -1, -1, -1))
			if p.Leader == int32(i+1) && err != nil {
				t.Fatalf("broker %d leads %d: %v", i+1, p.Partition, err)
			}
			if p.Leader != int32(i+1) && !errors.Is(err, ErrNotLeader) {
				t.Fatalf("broker %d, partition %d led by %d: %v", i+1, p.Partition, p.Leader, err)
			}
		}
	}
	if _, err := q.brokers[ctl].CreateTopic(ctx, CreateTopicRequest{Name: "spread", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := q.brokers[follower].CreateTopic(ctx, CreateTopicRequest{Name: "rf4", NumPartitions: 1, ReplicationFactor: 4}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("RF 4 on 3 brokers: %v", err)
	}
	// Producer IDs from every broker are distinct (blocks reserved through
	// the controller).
	seen := map[int64]bool{}
	for i, b := range q.brokers {
		id, err := b.AllocateProducerID(ctx)
		if err != nil || seen[id] {
			t.Fatalf("broker %d: producer id %d (%v), seen %v", i+1, id, err, seen)
		}
		seen[id] = true
	}

	// Lose the controller: the other two elect one and take writes; the
	// old one catches up when it comes back.
	q.brokers[ctl].Close()
	q.brokers[ctl] = nil
	newCtl := q.controller()
	if newCtl == ctl {
		t.Fatal("controller did not move")
	}
	other := 3 - ctl - newCtl
	if _, err := q.brokers[other].CreateTopic(ctx, CreateTopicRequest{Name: "after", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic with the old controller down: %v", err)
	}
	if err := q.start(ctl); err != nil {
		t.Fatal(err)
	}
	q.waitTopic(ctl, "after")
	if n := len(q.brokers[ctl].Brokers()); n != 3 {
		t.Fatalf("restarted broker sees %d brokers", n)
	}
}
