package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/testwait"
)

// sarama is a test-only dependency: issue 4 asks for sarama's consumer group
// against our group protocol, as the field's standard Go client besides
// franz-go. Nothing outside this file imports it.

const (
	saramaRecords    = 3000
	saramaPartitions = 6
	saramaMembers    = 3
)

// saramaLog collects sarama's global log so a failing test can show it.
// sarama.Logger is a package variable: set once, never swapped per test.
var saramaLog = struct {
	once sync.Once
	w    *lockedWriter
}{w: &lockedWriter{mu: new(sync.Mutex), buf: new(bytes.Buffer)}}

func saramaLogTail() string {
	saramaLog.w.mu.Lock()
	defer saramaLog.w.mu.Unlock()
	s := saramaLog.w.buf.String()
	if len(s) > 20000 {
		s = "..." + s[len(s)-20000:]
	}
	return s
}

func saramaConfig(version sarama.KafkaVersion, strategy sarama.BalanceStrategy) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "strata-e2e-sarama"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond

	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1

	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Max = 20
	if strategy != nil {
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	}
	return cfg
}

// pOff names one record of the topic.
type pOff struct {
	p int32
	o int64
}

// saramaSeen is what all members of one group consumed.
type saramaSeen struct {
	mu     sync.Mutex
	first  map[pOff]int32 // generation that first delivered the record
	count  map[pOff]int
	values map[pOff]string
	dups   int
	late   []string // duplicates not explained by a rebalance
	errs   []string
}

func newSaramaSeen() *saramaSeen {
	return &saramaSeen{first: map[pOff]int32{}, count: map[pOff]int{}, values: map[pOff]string{}}
}

func (s *saramaSeen) unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

func (s *saramaSeen) addErr(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 50 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

// saramaHandler is one member's sarama.ConsumerGroupHandler.
type saramaHandler struct {
	seen    *saramaSeen
	setups  chan []int32 // the partitions of each new session (buffered, never blocks)
	mu      sync.Mutex
	records int // records this member consumed; protected by mu
	claims  int // partition claims it was given (cooperative ones arrive mid-session); protected by mu
}

func (h *saramaHandler) Setup(sess sarama.ConsumerGroupSession) error {
	select {
	case h.setups <- sess.Claims()[saramaTopicOf(sess)]:
	default:
	}
	return nil
}

func saramaTopicOf(sess sarama.ConsumerGroupSession) string {
	for t := range sess.Claims() {
		return t
	}
	return ""
}

// Cleanup commits what was marked; a commit refused because the generation
// ended shows up as a duplicate later, which the test counts.
func (h *saramaHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	sess.Commit()
	return nil
}

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	gen := sess.GenerationID()
	h.mu.Lock()
	h.claims++
	h.mu.Unlock()
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			k := pOff{m.Partition, m.Offset}
			s := h.seen
			s.mu.Lock()
			if n := s.count[k]; n > 0 {
				s.dups++
				// A record delivered again within the generation that first
				// delivered it is not a rebalance window: report it.
				if s.first[k] == gen && len(s.late) < 20 {
					s.late = append(s.late, fmt.Sprintf("p%d@%d twice in generation %d", k.p, k.o, gen))
				}
			} else {
				s.first[k] = gen
				s.values[k] = string(m.Value)
			}
			s.count[k]++
			s.mu.Unlock()
			h.mu.Lock()
			h.records++
			h.mu.Unlock()
			sess.MarkMessage(m, "")
		}
	}
}

// saramaMember runs one sarama consumer group member until stop is called.
type saramaMember struct {
	group   sarama.ConsumerGroup
	handler *saramaHandler
	cancel  context.CancelFunc
	done    chan struct{}
}

func startSaramaMember(t *testing.T, addr, groupID, topic string, cfg *sarama.Config, seen *saramaSeen) *saramaMember {
	t.Helper()
	g, err := sarama.NewConsumerGroup([]string{addr}, groupID, cfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{group: g, handler: &saramaHandler{seen: seen, setups: make(chan []int32, 64)}, cancel: cancel, done: make(chan struct{})}
	go func() {
		for err := range g.Errors() {
			seen.addErr("member error: %v", err)
		}
	}()
	go func() {
		defer close(m.done)
		// Consume returns at the end of each session (every rebalance);
		// bound the number of sessions so a broken broker cannot spin us.
		for i := 0; i < 200 && ctx.Err() == nil; i++ {
			if err := g.Consume(ctx, []string{topic}, m.handler); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				seen.addErr("consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop ends the member's session (its final commit) and leaves the group.
func (m *saramaMember) stop(t *testing.T) {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		t.Errorf("sarama member did not return from Consume within 20s")
	}
	if err := m.group.Close(); err != nil {
		t.Errorf("closing sarama member: %v", err)
	}
}

// TestSaramaConsumerGroup: sarama's idempotent SyncProducer writes 3,000
// records to 6 partitions while three sarama consumer group members join one
// after the other; every record is consumed, duplicates only across a
// rebalance, the committed offsets end at the log end offsets, and a
// restarted member gets nothing new. Run with each assignor and with an old
// protocol version.
func TestSaramaConsumerGroup(t *testing.T) {
	saramaLog.once.Do(func() { sarama.Logger = log.New(saramaLog.w, "[sarama] ", log.Lmicroseconds) })
	b := startBroker(t, "", groupArgs...)
	cases := []struct {
		name     string
		version  sarama.KafkaVersion
		strategy func() sarama.BalanceStrategy
	}{
		{"range", sarama.V4_0_0_0, sarama.NewBalanceStrategyRange},
		{"roundrobin", sarama.V4_0_0_0, sarama.NewBalanceStrategyRoundRobin},
		{"sticky", sarama.V3_6_0_0, sarama.NewBalanceStrategySticky},
		{"cooperative-sticky", sarama.V4_0_0_0, sarama.NewBalanceStrategyCooperativeSticky},
		{"range-v2.1", sarama.V2_1_0_0, sarama.NewBalanceStrategyRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "sarama-"+tc.name, "sarama-group-"+tc.name
			runSaramaGroup(t, b, topic, group, func() *sarama.Config { return saramaConfig(tc.version, tc.strategy()) })
			if t.Failed() {
				t.Logf("sarama log:\n%s", saramaLogTail())
			}
		})
	}
}

func runSaramaGroup(t *testing.T, b *broker, topic, group string, newCfg func() *sarama.Config) {
	createTopic(t, b, topic, saramaPartitions)

	prod, err := sarama.NewSyncProducer([]string{b.addr}, newCfg())
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer prod.Close()

	// Produce in batches while the members join at different times.
	seen := newSaramaSeen()
	produced := make(map[pOff]string, saramaRecords)
	var members []*saramaMember
	const batch = 100
	for i := 0; i < saramaRecords; i += batch {
		switch i {
		case 0, saramaRecords / 3, 2 * saramaRecords / 3:
			members = append(members, startSaramaMember(t, b.addr, group, topic, newCfg(), seen))
		}
		msgs := make([]*sarama.ProducerMessage, 0, batch)
		for j := i; j < i+batch; j++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic,
				Key: sarama.StringEncoder("k" + strconv.Itoa(j)), Value: sarama.StringEncoder("v" + strconv.Itoa(j))})
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatalf("SendMessages at %d: %v", i, err)
		}
		for _, m := range msgs {
			k := pOff{m.Partition, m.Offset}
			if _, dup := produced[k]; dup {
				t.Fatalf("two records acknowledged at partition %d offset %d", k.p, k.o)
			}
			produced[k] = string(m.Value.(sarama.StringEncoder))
		}
		time.Sleep(20 * time.Millisecond) // spread production over the joins
	}
	if len(produced) != saramaRecords || len(members) != saramaMembers {
		t.Fatalf("produced %d records, started %d members", len(produced), len(members))
	}

	// The idempotent producer wrote each partition densely from offset 0.
	ends := map[int32]int64{}
	for k := range produced {
		ends[k.p]++
	}
	for k := range produced {
		if k.o < 0 || k.o >= ends[k.p] {
			t.Fatalf("partition %d: offset %d outside [0,%d): offsets are not dense", k.p, k.o, ends[k.p])
		}
	}

	testwait.Until(30*time.Second, func() bool { return seen.unique() >= saramaRecords })
	if n := seen.unique(); n != saramaRecords {
		seen.mu.Lock()
		t.Errorf("errors: %v", seen.errs)
		seen.mu.Unlock()
		t.Fatalf("consumed %d distinct records of %d in 30s", n, saramaRecords)
	}
	// Every member took part: each was given partitions at some point.
	for i, m := range members {
		m.handler.mu.Lock()
		n, claims := m.handler.records, m.handler.claims
		m.handler.mu.Unlock()
		t.Logf("member %d claimed %d partitions, consumed %d records", i, claims, n)
		if claims == 0 {
			t.Errorf("member %d was never assigned a partition", i)
		}
	}
	for i := len(members) - 1; i >= 0; i-- {
		members[i].stop(t)
	}

	seen.mu.Lock()
	for k, v := range produced {
		if seen.values[k] != v {
			t.Errorf("partition %d offset %d: consumed %q, produced %q", k.p, k.o, seen.values[k], v)
			break
		}
	}
	t.Logf("%d records, %d duplicates (rebalance windows), errors: %v", saramaRecords, seen.dups, seen.errs)
	if len(seen.late) > 0 {
		t.Errorf("duplicates within one generation: %v", seen.late)
	}
	if seen.dups > saramaRecords/2 {
		t.Errorf("%d duplicates for %d records: commits are not taking effect", seen.dups, saramaRecords)
	}
	seen.mu.Unlock()

	// The group's committed offsets are the log end offsets.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client())
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	endOffs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	for p := int32(0); p < saramaPartitions; p++ {
		end, ok := endOffs.Lookup(topic, p)
		if !ok || end.Err != nil || end.Offset != ends[p] {
			t.Errorf("partition %d: end offset %+v, produced %d", p, end, ends[p])
		}
		c, ok := committed.Lookup(topic, p)
		if !ok || c.Err != nil || c.At != ends[p] {
			t.Errorf("partition %d: committed %+v, want %d", p, c, ends[p])
		}
	}
	if t.Failed() {
		return
	}

	// A restarted member of the same group is assigned every partition and
	// consumes only what is produced after it joined: it starts at the
	// committed offsets (waiting for the new records proves it fetched).
	again := newSaramaSeen()
	m := startSaramaMember(t, b.addr, group, topic, newCfg(), again)
	select {
	case parts := <-m.handler.setups:
		if len(parts) != saramaPartitions {
			t.Errorf("restarted member assigned %v, want all %d partitions", parts, saramaPartitions)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("restarted member never joined")
	}
	var after []*sarama.ProducerMessage
	for j := 0; j < 2*saramaPartitions; j++ {
		after = append(after, &sarama.ProducerMessage{Topic: topic,
			Key: sarama.StringEncoder("after" + strconv.Itoa(j)), Value: sarama.StringEncoder("after" + strconv.Itoa(j))})
	}
	if err := prod.SendMessages(after); err != nil {
		t.Fatalf("SendMessages after the restart: %v", err)
	}
	got := testwait.Until(20*time.Second, func() bool { return again.unique() >= len(after) })
	m.stop(t)
	if !got {
		t.Errorf("restarted member consumed %d of the %d records produced after it joined", again.unique(), len(after))
	}
	again.mu.Lock()
	defer again.mu.Unlock()
	for k, v := range again.values {
		if !strings.HasPrefix(v, "after") {
			t.Errorf("restarted member consumed %q (partition %d offset %d), committed before it joined", v, k.p, k.o)
			break
		}
	}
}
