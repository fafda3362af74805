package replication

import (
	"sort"
)

// LogRaftState writes one log line per partition group and one for the
// metadata group: raft's own view (state, term, last index, commit and
// applied index, last contact) next to the partition's (log end, high
// watermark, the raft store's last index and the offset it maps to). An
// operator's aid (strata serve logs it on SIGUSR1) for a replica that
// does not catch up: raft's last index past the log end means the store
// and the segments disagree.
func (b *Broker) LogRaftState() {
	if b.raft != nil {
		st := b.raft.Stats()
		b.logger.Info("raft state", "group", "metadata", "state", st["state"], "term", st["term"],
			"last_log_index", st["last_log_index"], "commit_index", st["commit_index"], "applied_index", st["applied_index"],
			"last_contact", st["last_contact"])
	}
	b.groupsMu.RLock()
	groups := make([]*partitionGroup, 0, len(b.groups))
	for _, g := range b.groups {
		groups = append(groups, g)
	}
	b.groupsMu.RUnlock()
	sort.Slice(groups, func(i, j int) bool { return groups[i].tp.String() < groups[j].tp.String() })
	for _, g := range groups {
		st := g.raft.Stats()
		last, _ := g.store.LastIndex()
		var lastOffset int64 = -1
		if l, ok := g.store.loc(last); ok {
			lastOffset = l.offset
			if l.last >= 0 {
				lastOffset = l.last
			}
		}
		off := g.lp.Offsets()
		b.logger.Info("raft state", "partition", g.tp.String(), "state", st["state"], "term", st["term"],
			"last_log_index", st["last_log_index"], "last_log_term", st["last_log_term"], "commit_index", st["commit_index"],
			"applied_index", st["applied_index"], "last_contact", st["last_contact"],
			"store_last_index", last, "store_last_offset", lastOffset, "log_end", off.LogEnd, "high_watermark", off.HighWatermark)
	}
}
