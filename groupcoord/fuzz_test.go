package groupcoord

import (
	"testing"
	"time"
)

// FuzzReplay: any key/value in __consumer_offsets, and any bytes read back
// as batches, are skipped or applied without a panic (a corrupt or foreign
// record must not take a coordinator partition down).
//
//	go test ./groupcoord -run '^$' -fuzz FuzzReplay -fuzztime 10s
func FuzzReplay(f *testing.F) {
	m := &cmember{id: "m", subscribed: []string{"t"}, assigned: assignment{{1}: {0, 1}}, pendingRevoke: assignment{{1}: {2}}}
	id := "m"
	seeds := []record{
		offsetRecord("g", "t", 0, offsetEntry{Offset: 5, LeaderEpoch: 1, Metadata: "x", CommitMs: 1}),
		offsetTombstone("g", "t", 0),
		newGroupWithMember().metadataRecord(time.Unix(1, 0)),
		groupTombstone("g"),
		{Key: cgKey(keyCGMetadata, "g", nil), Value: cgEpochValue(3)},
		{Key: cgKey(keyCGMember, "g", &id), Value: cgMemberValue(m)},
		{Key: cgKey(keyCGTargetMember, "g", &id), Value: cgTargetValue(m.assigned)},
		{Key: cgKey(keyCGCurrent, "g", &id), Value: cgCurrentValue(m)},
	}
	for _, r := range seeds {
		f.Add(r.Key, r.Value, buildBatch([]record{r}, 1))
	}
	f.Fuzz(func(t *testing.T, key, value, batch []byte) {
		s := newShard(&Coordinator{cfg: Config{Logger: quiet()}.withDefaults()}, 0, 0)
		now := time.Unix(1700000000, 0)
		_ = s.replay(decodedRecord{Key: key, Value: value, Control: -1}, now)
		_, _ = decodeBatches(batch, 0, func(r decodedRecord) error { return s.replay(r, now) })
		for _, g := range s.groups {
			var e effects
			g.tick(&e, now.Add(time.Hour))
		}
		for _, cg := range s.cgroups {
			var e effects
			cg.tick(&e, now.Add(time.Hour))
			cg.describe(func([16]byte) string { return "" })
		}
	})
}

func newGroupWithMember() *group {
	g := newGroup("g", time.Unix(1, 0))
	g.protocolType, g.protocol, g.generation, g.leader, g.state = "consumer", "range", 2, "a", stateStable
	g.members["a"] = &member{id: "a", sessionTimeout: time.Second, rebalanceTimeout: time.Second, assignment: []byte("A")}
	return g
}
