package groupcoord

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the group's committed offsets: OffsetCommit validation,
// OffsetFetch, OffsetDelete and DeleteGroups. Like group.go it is pure.

// commitCheck validates an OffsetCommit's member fields against the group
// (Kafka's rules): 0 or the error for every partition. A commit with no
// generation (-1) and no member is a "simple" commit, allowed only while
// the group has no members (the admin client, kadm, kcat without -G).
func (g *group) commitCheck(now time.Time, version int16, generation int32, memberID string, instanceID *string) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		m, code := g.checkMember(memberID, instanceID)
		if code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		m.sessionDeadline = now.Add(m.sessionTimeout) // a commit is a heartbeat
	} else if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	if g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// commit stores one offset and returns its record.
func (g *group) commit(topic string, partition int32, o offsetEntry) record {
	ps := g.offsets[topic]
	if ps == nil {
		ps = map[int32]offsetEntry{}
		g.offsets[topic] = ps
	}
	ps[partition] = o
	return offsetRecord(g.id, topic, partition, o)
}

// offset returns the committed offset of a partition.
func (g *group) offset(topic string, partition int32) (offsetEntry, bool) {
	o, ok := g.offsets[topic][partition]
	return o, ok
}

// deleteOffset drops one committed offset, returning its tombstone.
func (g *group) deleteOffset(topic string, partition int32) (record, bool) {
	ps := g.offsets[topic]
	if _, ok := ps[partition]; !ok {
		return record{}, false
	}
	delete(ps, partition)
	if len(ps) == 0 {
		delete(g.offsets, topic)
	}
	return offsetTombstone(g.id, topic, partition), true
}

// sortedOffsetTopics lists the topics with committed offsets, sorted.
func (g *group) sortedOffsetTopics() []string {
	ts := make([]string, 0, len(g.offsets))
	for t := range g.offsets {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func sortedPartitions(ps map[int32]offsetEntry) []int32 {
	out := make([]int32, 0, len(ps))
	for p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// subscribedTopics is the union of the members' subscriptions, for a
// group speaking the consumer protocol (OffsetDelete refuses those).
func (g *group) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}

// deleteAll makes the group Dead and returns the tombstones of its
// offsets and metadata (DeleteGroups). Only an Empty group may be deleted.
func (g *group) deleteAll() ([]record, int16) {
	if g.state == stateDead {
		return nil, kerr.GroupIDNotFound.Code
	}
	if g.state != stateEmpty {
		return nil, kerr.NonEmptyGroup.Code
	}
	var recs []record
	for _, t := range g.sortedOffsetTopics() {
		for _, p := range sortedPartitions(g.offsets[t]) {
			recs = append(recs, offsetTombstone(g.id, t, p))
		}
	}
	recs = append(recs, groupTombstone(g.id))
	g.offsets = map[string]map[int32]offsetEntry{}
	g.state = stateDead
	return recs, 0
}

// describe fills one DescribeGroups entry.
func (g *group) describe(version int16) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	d.Protocol = g.protocol
	d.AuthorizedOperations = -2147483648
	withData := g.state == stateStable || g.state == stateCompletingRebalance
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID = m.id, m.instanceID
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		if withData {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// expireOffsets drops the offsets of an empty group that are past the
// retention (offsets.retention.minutes, KIP-211): counted from the commit,
// or, for a group that had members, from when it became empty, whichever
// is later. A group left with no offsets and no members is deleted too.
// It returns the tombstones to write.
func (g *group) expireOffsets(now time.Time, retention time.Duration) []record {
	if g.state != stateEmpty || len(g.pending) > 0 {
		return nil
	}
	var recs []record
	for _, t := range g.sortedOffsetTopics() {
		for _, p := range sortedPartitions(g.offsets[t]) {
			base := time.UnixMilli(g.offsets[t][p].CommitMs)
			if g.protocolType != "" && g.stateSince.After(base) {
				base = g.stateSince
			}
			if now.Sub(base) >= retention {
				if r, ok := g.deleteOffset(t, p); ok {
					recs = append(recs, r)
				}
			}
		}
	}
	if len(recs) > 0 && len(g.offsets) == 0 {
		recs = append(recs, groupTombstone(g.id))
		g.state = stateDead
	}
	return recs
}
