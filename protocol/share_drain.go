package protocol

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/sharepart"
)

// A source topic deleted while records are in flight: before DeleteTopics
// deletes a topic, the broker handling it asks every broker leading one of
// its partitions (replication.AskBroker) to drain them: each share group
// with a dead-letter topic gets its in-flight records (acquired, or
// available again) archived with a dead letter each, reason
// topic-deleted, in one replicated delta (sharepart.Drain) -- the letters
// then are state like any other -- and the leader writes them at once
// (the writer's flush) while the topic's records can still be read
// (errors.deadletterqueue.copy.record.enable). Acquisition on the topic
// stops meanwhile. The deletion waits for that at most drainWait; letters
// still unwritten then (the dead-letter topic unwritable) are lost with
// the topic's share state, counted and logged.

const (
	// drainRequest names the drain's handler on the partition leaders.
	drainRequest = "share-dlq-drain"
	// drainWait bounds how long a deletion waits for the drain.
	drainWait = 10 * time.Second
)

type drainAsk struct {
	Topic string   `json:"topic"`
	ID    [16]byte `json:"id"`
}

type drainAnswer struct {
	Letters int `json:"letters"` // letters recorded by the drain
	Left    int `json:"left"`    // letters still unwritten when it gave up
}

// drainTopic drains the topic's share partitions on their leaders before
// its deletion (DeleteTopics); a no-op unless some share group has a
// dead-letter topic.
func (l *shareLeader) drainTopic(ctx context.Context, name string) {
	b := l.broker
	if b == nil || !b.DeleteTopicEnabled() || !l.anyDeadLetters() {
		return
	}
	t, ok := b.Topic(name)
	if !ok {
		return
	}
	leaders := map[int32]bool{}
	for _, p := range t.Partitions {
		if p.Leader >= 0 {
			leaders[p.Leader] = true
		}
	}
	payload, err := json.Marshal(drainAsk{Topic: name, ID: t.ID})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, drainWait+2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for node := range leaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.AskBroker(ctx, node, drainRequest, payload); err != nil {
				l.dlq.log.Warn("draining a deleted topic's share partitions failed; records in flight there are not dead-lettered",
					"topic", name, "broker", node, "err", err)
			}
		}()
	}
	wg.Wait()
}

// anyDeadLetters reports whether some group has a dead-letter topic.
func (l *shareLeader) anyDeadLetters() bool {
	b := l.broker
	for _, g := range b.GroupsWithConfigs() {
		if strings.TrimSpace(b.GroupConfigsView(g)[groupconfig.DLQTopicName]) != "" {
			return true
		}
	}
	return false
}

// draining reports whether acquisition on the topic is stopped for its
// deletion.
func (l *shareLeader) draining(topicID [16]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.drains[topicID]
	if ok && l.cfg.Now().After(until) {
		delete(l.drains, topicID)
		return false
	}
	return ok
}

// drainReceive is a partition leader's side: it drains the share
// partitions of the topic it leads.
func (w *dlqWriter) drainReceive(payload []byte) ([]byte, error) {
	var a drainAsk
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, err
	}
	l := w.l
	b := l.broker
	t, ok := b.Topic(a.Topic)
	if !ok || t.ID != a.ID {
		return json.Marshal(drainAnswer{})
	}
	l.mu.Lock()
	if l.drains == nil {
		l.drains = map[[16]byte]time.Time{}
	}
	l.drains[t.ID] = l.cfg.Now().Add(2 * drainWait) // acquisition stops (until the deletion, or this)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), drainWait)
	defer cancel()
	var ans drainAnswer
	me := b.NodeID()
	for _, p := range t.Partitions {
		if p.Leader != me {
			continue
		}
		reg, epoch, err := b.ShareLeader(ctx, t.Name, p.Partition)
		if err != nil {
			continue
		}
		for _, g := range reg.Groups() {
			gs := l.settings(g)
			if !gs.part.DeadLetters {
				continue
			}
			key := shareKey{t.ID, p.Partition, g}
			sp := l.part(key)
			if err := sp.acquire(ctx); err != nil {
				break
			}
			if st, _ := reg.Group(g); st != nil {
				d, stats := sharepart.Drain(st, g, gs.part)
				if !d.Empty() {
					if err := b.ShareApplyAt(ctx, t.Name, p.Partition, epoch, d.Encode()); err == nil {
						l.count(key, stats)
						ans.Letters += stats.DeadLettered
					}
				}
			}
			sp.release()
			// Write them now, while the records can still be read.
			for {
				st, _ := reg.Group(g)
				if st == nil || len(st.DeadLetters()) == 0 {
					break
				}
				if ctx.Err() != nil {
					ans.Left += len(st.DeadLetters())
					w.dropped.Add(int64(len(st.DeadLetters())))
					w.log.Warn("dead letters of a deleted topic could not be written in time; they are lost with its share state",
						"topic", t.Name, "partition", p.Partition, "group", g, "letters", len(st.DeadLetters()))
					break
				}
				if err := w.flush(t, p.Partition, g); err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(dlqEvery):
					}
				}
			}
		}
	}
	return json.Marshal(ans)
}
