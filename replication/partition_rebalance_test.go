package replication

import (
	"fmt"
	"sort"
	"testing"
)

// TestImbalancedPartitions checks which partitions a leader-balance check
// moves back to their preferred replica: Kafka's per-broker share test
// (strictly above the percentage), and only partitions whose preferred
// replica is in the ISR, live, the partition led and not being
// reassigned. (The moves themselves are ElectLeaders' transfer path;
// internal/e2e TestLeaderRebalanceAfterRollingRestart runs the whole
// thing on real processes.)
func TestImbalancedPartitions(t *testing.T) {
	all := []int32{1, 2, 3}
	part := func(p, leader int32, replicas, isr []int32) PartitionInfo {
		return PartitionInfo{Partition: p, Leader: leader, Replicas: replicas, ISR: isr}
	}
	// Broker 1 is preferred for 4 partitions and leads 2 of them (50%
	// imbalance); broker 2 is preferred for 4 and leads 3 (25%); broker 3
	// for 2, leading both.
	topic := &TopicInfo{Name: "a", ID: [16]byte{1}, Partitions: []PartitionInfo{
		part(0, 1, []int32{1, 2, 3}, all),
		part(1, 1, []int32{1, 3, 2}, all),
		part(2, 2, []int32{1, 2, 3}, all),                // imbalanced, movable
		part(3, 3, []int32{1, 3, 2}, []int32{3, 2}),      // imbalanced, broker 1 not in the ISR
		part(4, 2, []int32{2, 3, 1}, all),                // balanced
		part(5, 2, []int32{2, 1, 3}, all),                // balanced
		part(6, 2, []int32{2, 3, 1}, all),                // balanced
		part(7, 3, []int32{2, 3, 1}, all),                // imbalanced
		part(8, 3, []int32{3, 1, 2}, all),                // balanced
		part(9, 3, []int32{3, 2, 1}, all),                // balanced
		part(10, 1, []int32{1}, []int32{1}),              // one replica: never counted
		part(11, -1, []int32{2, 3, 1}, []int32{2, 3, 1}), // no leader: counted, not moved
		part(12, 3, []int32{2, 3, 1}, all),               // imbalanced
		part(13, 2, []int32{3, 2, 1}, nil),               // imbalanced, empty ISR
		part(14, 2, []int32{3, 2, 1}, []int32{3, 2, 1}),  // imbalanced
		part(15, 2, []int32{3, 2, 1}, []int32{3, 2, 1}),  // imbalanced
		part(16, 1, []int32{3, 1, 2}, []int32{3, 2, 1}),  // imbalanced
		part(17, 1, []int32{3, 1, 2}, []int32{1, 2, 3})}} // imbalanced
	topic.Partitions[17].Target = []int32{3, 1, 2, 4} // being reassigned: left alone
	img := newImage()
	img.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics[topic.Name], byID[topic.ID] = topic, topic
	})
	liveAll := func(int32) bool { return true }
	moved := func(ms []rebalanceMove) string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%d->%d", m.partition, m.to))
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	// Counts: broker 1 is preferred for 0-3 and led elsewhere in 2 and
	// 3 (50%); broker 2 for 4-7, 11, 12, elsewhere in 7, 11, 12 (50%);
	// broker 3 for 8, 9, 13-17, elsewhere in 13-17 (5 of 7, 71.4%).
	for _, c := range []struct {
		pct  int
		live func(int32) bool
		want string
	}{
		{10, liveAll, "[12->2 14->3 15->3 16->3 2->1 7->2]"},
		{0, liveAll, "[12->2 14->3 15->3 16->3 2->1 7->2]"},
		{49, liveAll, "[12->2 14->3 15->3 16->3 2->1 7->2]"},
		// 50% is not above 50.
		{50, liveAll, "[14->3 15->3 16->3]"},
		{71, liveAll, "[14->3 15->3 16->3]"},
		{72, liveAll, "[]"},
		{10, func(n int32) bool { return n != 3 }, "[12->2 2->1 7->2]"},
	} {
		ms, imb := imbalancedPartitions(img, c.pct, c.live)
		if got := moved(ms); got != c.want {
			t.Errorf("pct %d: moves %s, want %s", c.pct, got, c.want)
		}
		if want := map[int32]int{1: 2, 2: 3, 3: 5}; fmt.Sprint(imb) != fmt.Sprint(want) {
			t.Errorf("pct %d: imbalance %v, want %v", c.pct, imb, want)
		}
	}
}
