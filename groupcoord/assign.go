package groupcoord

import (
	"sort"
)

// This file holds the KIP-848 server-side assignors. Both are pure
// functions of the members' subscriptions, the topics' partition counts and
// (uniform) the previous target assignment, so every replica computes the
// same answer.

// topicPartition names one partition by topic ID.
type topicPartition struct {
	topic     [16]byte
	partition int32
}

// assignment is a set of partitions by topic ID (partitions sorted).
type assignment map[[16]byte][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = append([]int32(nil), ps...)
	}
	return out
}

// Invariant: each topic's partitions are sorted and distinct, so lookups
// are binary searches (topics may have thousands of partitions).
func (a assignment) has(tp topicPartition) bool {
	ps := a[tp.topic]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] >= tp.partition })
	return i < len(ps) && ps[i] == tp.partition
}

func (a assignment) add(tp topicPartition) {
	ps := a[tp.topic]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] >= tp.partition })
	if i < len(ps) && ps[i] == tp.partition {
		return
	}
	ps = append(ps, 0)
	copy(ps[i+1:], ps[i:])
	ps[i] = tp.partition
	a[tp.topic] = ps
}

func (a assignment) list() []topicPartition {
	var out []topicPartition
	for _, t := range sortedTopicIDs(a) {
		for _, p := range a[t] {
			out = append(out, topicPartition{t, p})
		}
	}
	return out
}

func (a assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if a.size() != b.size() {
		return false
	}
	for _, tp := range a.list() {
		if !b.has(tp) {
			return false
		}
	}
	return true
}

// minus returns the partitions of a not in b.
func (a assignment) minus(b assignment) assignment {
	out := assignment{}
	for _, tp := range a.list() {
		if !b.has(tp) {
			out.add(tp)
		}
	}
	return out
}

// intersect returns the partitions in both a and b.
func (a assignment) intersect(b assignment) assignment {
	out := assignment{}
	for _, tp := range a.list() {
		if b.has(tp) {
			out.add(tp)
		}
	}
	return out
}

func sortedTopicIDs(a assignment) [][16]byte {
	ids := make([][16]byte, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			ids = append(ids, t)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// topicMeta is a subscribed topic as the assignor sees it.
type topicMeta struct {
	name       string
	id         [16]byte
	partitions int32
}

// assignInput is what an assignor gets: each member's subscribed topics
// (only topics that exist), and the previous target.
type assignInput struct {
	members []string               // sorted member IDs
	subs    map[string][]topicMeta // member -> subscribed existing topics, sorted by name
	prev    map[string]assignment  // previous target per member
}

// assignRange gives each topic's partitions, in order, to the members
// subscribed to it, in member-ID order, in contiguous ranges (Kafka's
// range assignor: the first n%m members get one more).
func assignRange(in assignInput) map[string]assignment {
	out := map[string]assignment{}
	byTopic := map[[16]byte][]string{}
	metas := map[[16]byte]topicMeta{}
	for _, m := range in.members {
		out[m] = assignment{}
		for _, t := range in.subs[m] {
			byTopic[t.id] = append(byTopic[t.id], m)
			metas[t.id] = t
		}
	}
	for id, ms := range byTopic {
		n, k := int(metas[id].partitions), len(ms)
		p := 0
		for i, m := range ms {
			cnt := n / k
			if i < n%k {
				cnt++
			}
			for j := 0; j < cnt; j++ {
				out[m].add(topicPartition{id, int32(p)})
				p++
			}
		}
	}
	return out
}

// assignUniform spreads all subscribed partitions evenly over the members,
// keeping each partition where it was when that keeps the balance
// (sticky), so a rebalance moves as few partitions as it can.
func assignUniform(in assignInput) map[string]assignment {
	out := map[string]assignment{}
	subscribers := map[[16]byte][]string{}
	var all []topicPartition
	metas := map[[16]byte]topicMeta{}
	for _, m := range in.members {
		out[m] = assignment{}
		for _, t := range in.subs[m] {
			if _, ok := metas[t.id]; !ok {
				metas[t.id] = t
				for p := int32(0); p < t.partitions; p++ {
					all = append(all, topicPartition{t.id, p})
				}
			}
			subscribers[t.id] = append(subscribers[t.id], m)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].topic != all[j].topic {
			return string(all[i].topic[:]) < string(all[j].topic[:])
		}
		return all[i].partition < all[j].partition
	})
	if len(in.members) == 0 {
		return out
	}
	// Sticky passes: each member keeps up to lo of its previous
	// partitions, then up to P%M members keep one more; the rest go to the
	// least loaded subscriber.
	lo, extra := len(all)/len(in.members), len(all)%len(in.members)
	count := map[string]int{}
	owner := map[topicPartition]string{}
	for _, pass := range []int{0, 1} {
		for _, tp := range all {
			if owner[tp] != "" {
				continue
			}
			for _, m := range subscribers[tp.topic] {
				if !in.prev[m].has(tp) {
					continue
				}
				if pass == 0 && count[m] < lo || pass == 1 && count[m] == lo && extra > 0 {
					if pass == 1 {
						extra--
					}
					owner[tp] = m
					out[m].add(tp)
					count[m]++
				}
				break
			}
		}
	}
	var rest []topicPartition
	for _, tp := range all {
		if owner[tp] == "" {
			rest = append(rest, tp)
		}
	}
	for _, tp := range rest {
		best := ""
		for _, m := range subscribers[tp.topic] {
			if best == "" || count[m] < count[best] || (count[m] == count[best] && m < best) {
				best = m
			}
		}
		out[best].add(tp)
		count[best]++
	}
	return out
}
