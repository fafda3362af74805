package replication

import (
	"context"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Partition leaders as the metadata records them: the reports' command
// and its apply, the controller's commit of reports without the writer
// lock, and CreateTopics' wait for the new partitions' leaders. The
// reports come from the replicas (partition_leaders.go).

// LeaderReport is one partition's leadership as its group elected it.
// Field names are in the metadata log.
type LeaderReport struct {
	TopicID   [16]byte `json:"t"`
	Partition int32    `json:"p"`
	Leader    int32    `json:"l"`
	Epoch     int32    `json:"e"`
	ISR       []int32  `json:"isr,omitempty"`
}

// applyLeaders updates the partitions named in rs. A report older than
// what the image holds (a lower epoch) is skipped: reports race, the
// highest epoch wins. Reports of unknown partitions (deleted since) and of
// leaders that are not replicas are skipped too.
func (im *image) applyLeaders(rs []LeaderReport) {
	changed := map[[16]byte]*TopicInfo{}
	for _, r := range rs {
		t, ok := changed[r.TopicID]
		if !ok {
			if t, ok = im.byID[r.TopicID]; !ok {
				continue
			}
		}
		if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			continue
		}
		cur := t.Partitions[r.Partition]
		members := cur.members()
		if !containsNode(members, r.Leader) || r.Epoch < cur.LeaderEpoch ||
			(r.Epoch == cur.LeaderEpoch && (r.Leader != cur.Leader || equalNodes(r.ISR, cur.ISR))) {
			continue
		}
		if _, copied := changed[r.TopicID]; !copied {
			nt := *t
			nt.Partitions = append([]PartitionInfo(nil), t.Partitions...)
			t = &nt
			changed[r.TopicID] = t
		}
		isr := []int32{r.Leader}
		for _, n := range members {
			if n != r.Leader && containsNode(r.ISR, n) {
				isr = append(isr, n)
			}
		}
		p := &t.Partitions[r.Partition]
		p.Leader, p.LeaderEpoch, p.ISR = r.Leader, r.Epoch, isr
	}
	if len(changed) == 0 {
		return
	}
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		for id, t := range changed {
			topics[t.Name] = t
			byID[id] = t
		}
	})
}

func equalNodes(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]int32(nil), a...)
	y := append([]int32(nil), b...)
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
	sort.Slice(y, func(i, j int) bool { return y[i] < y[j] })
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// commitUnlocked has the controller commit c without this broker's writer
// lock: for commands that are idempotent and validated by Apply alone
// (leader reports, reassignment completion).
func (q *metadataQuorum) commitUnlocked(c Command) error {
	if err := q.rlog.Err(); err != nil {
		return err
	}
	if q.raft.State() == raft.Leader {
		_, _, err := q.proposeLocked(c)
		return err
	}
	_, err := q.forwardToController(c)
	return err
}

// waitLeaders waits (bounded) until every partition of topic from first
// on has a leader its group elected (epoch above 0, the epoch a partition
// is created with).
func (q *metadataQuorum) waitLeaders(ctx context.Context, topic string, first int32) {
	ctx, cancel := context.WithTimeout(ctx, createLeaderWait)
	defer cancel()
	for {
		t, ok := q.img.Load().topics[topic]
		if !ok {
			return
		}
		done := true
		for _, p := range t.Partitions[min(int(first), len(t.Partitions)):] {
			if p.LeaderEpoch <= 0 {
				done = false
				break
			}
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			q.logger.Warn("new partitions have no elected leader yet", "topic", topic)
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
