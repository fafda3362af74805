package groupcoord

import (
	"fmt"
	"testing"
)

func metaT(name string, n int32) topicMeta {
	var id [16]byte
	copy(id[:], name)
	return topicMeta{name: name, id: id, partitions: n}
}

// Both assignors give every subscribed partition to exactly one subscriber,
// balanced within one partition for equal subscriptions; uniform keeps
// partitions where they were when members join.
func TestAssignors(t *testing.T) {
	for _, members := range []int{1, 3, 7} {
		in := assignInput{subs: map[string][]topicMeta{}}
		for m := 0; m < members; m++ {
			id := fmt.Sprintf("m%02d", m)
			in.members = append(in.members, id)
			in.subs[id] = []topicMeta{metaT("a", 10), metaT("b", 3)}
		}
		for name, fn := range map[string]func(assignInput) map[string]assignment{"range": assignRange, "uniform": assignUniform} {
			out := fn(in)
			seen := map[topicPartition]string{}
			lo, hi := 1<<30, 0
			for m, a := range out {
				for _, tp := range a.list() {
					if o, dup := seen[tp]; dup {
						t.Fatalf("%s: %v given to %s and %s", name, tp, o, m)
					}
					seen[tp] = m
				}
				lo, hi = min(lo, a.size()), max(hi, a.size())
			}
			if len(seen) != 13 {
				t.Fatalf("%s with %d members: %d of 13 partitions assigned", name, members, len(seen))
			}
			if name == "uniform" && hi-lo > 1 {
				t.Fatalf("uniform with %d members unbalanced: %d..%d", members, lo, hi)
			}
		}
	}
	// Stickiness: a fourth member joins three; uniform moves only what
	// the newcomer needs.
	in := assignInput{subs: map[string][]topicMeta{}}
	for _, id := range []string{"a", "b", "c"} {
		in.members = append(in.members, id)
		in.subs[id] = []topicMeta{metaT("t", 12)}
	}
	prev := assignUniform(in)
	in.members = append(in.members, "d")
	in.subs["d"] = []topicMeta{metaT("t", 12)}
	in.prev = prev
	next := assignUniform(in)
	moved := 0
	for _, id := range []string{"a", "b", "c"} {
		moved += prev[id].minus(next[id]).size()
	}
	if moved != 3 || next["d"].size() != 3 {
		t.Fatalf("uniform moved %d partitions (want 3), newcomer has %d", moved, next["d"].size())
	}
}

// 10,000 partitions and 100 members assign in well under a second.
func BenchmarkAssignUniform(b *testing.B) {
	in := assignInput{subs: map[string][]topicMeta{}}
	for m := 0; m < 100; m++ {
		id := fmt.Sprintf("m%03d", m)
		in.members = append(in.members, id)
		in.subs[id] = []topicMeta{metaT("big", 10000)}
	}
	in.prev = assignUniform(in)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		assignUniform(in)
	}
}
