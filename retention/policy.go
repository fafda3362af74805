package retention

import (
	"fmt"

	"github.com/strata-io/strata/log"
)

// ActionKind is what the cleaner does to a partition.
type ActionKind int

const (
	// ActionRoll seals the active segment so that it can be deleted: the
	// whole log is past retention, the active segment included.
	ActionRoll ActionKind = iota + 1
	// ActionDeleteBefore moves the log start offset to Offset, which
	// deletes every segment wholly below it.
	ActionDeleteBefore
)

func (k ActionKind) String() string {
	switch k {
	case ActionRoll:
		return "roll"
	case ActionDeleteBefore:
		return "delete-before"
	}
	return "unknown"
}

// Action is one step of a plan, carried out in order by the cleaner.
type Action struct {
	Kind   ActionKind
	Offset int64 // ActionDeleteBefore: the new log start offset
	// Reasons says why, one line per deleted segment (for logs and tests).
	Reasons []string
}

// PlanDelete decides which whole segments of a partition retention
// deletes, as Kafka's deleteOldSegments does. It is a pure function of
// the segment list (oldest first, the last one active), the partition's
// offsets, its cleanup config and the time now (Unix milliseconds).
//
// Segments go oldest first while each one is
//   - wholly below the log start offset (DeleteRecords moved it), or
//   - with cleanup.policy containing delete: older than retention.ms (its
//     newest record timestamp), or not needed to keep the partition at
//     retention.bytes or more (deleting it leaves at least
//     retention.bytes),
//
// and it is wholly committed (below the high watermark). The first segment
// that is not deletable stops the scan: the log start offset only ever
// moves to a segment boundary here, and the log stays contiguous. An empty
// active segment is never deleted; a non-empty one is, after a roll
// (ActionRoll first), when everything else went too.
func PlanDelete(segs []log.SegmentInfo, offs log.Offsets, cfg log.CleanupConfig, nowMs int64) []Action {
	if len(segs) == 0 {
		return nil
	}
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	remaining := total
	var reasons []string
	k := 0
	for ; k < len(segs); k++ {
		s := segs[k]
		if s.NextOffset > offs.HighWatermark || (s.Active && s.NextOffset == s.BaseOffset) {
			break
		}
		why := ""
		switch {
		case k+1 < len(segs) && segs[k+1].BaseOffset <= offs.LogStart:
			why = fmt.Sprintf("below the log start offset %d", offs.LogStart)
		case cfg.Delete && cfg.RetentionMs >= 0 && nowMs-s.MaxTimestamp > cfg.RetentionMs:
			if s.MaxTimestamp < 0 {
				why = fmt.Sprintf("retention.ms: no timestamp (retention.ms=%d)", cfg.RetentionMs)
			} else {
				why = fmt.Sprintf("retention.ms: newest record %d ms old > %d", nowMs-s.MaxTimestamp, cfg.RetentionMs)
			}
		case cfg.Delete && cfg.RetentionBytes >= 0 && remaining-s.Size >= cfg.RetentionBytes:
			why = fmt.Sprintf("retention.bytes: %d bytes left without it >= %d", remaining-s.Size, cfg.RetentionBytes)
		}
		if why == "" {
			break
		}
		reasons = append(reasons, fmt.Sprintf("segment %d: %s", s.BaseOffset, why))
		remaining -= s.Size
	}
	if k == 0 {
		return nil
	}
	if k == len(segs) {
		last := segs[k-1]
		return []Action{{Kind: ActionRoll}, {Kind: ActionDeleteBefore, Offset: last.NextOffset, Reasons: reasons}}
	}
	// segs[k] may start below the log start (the deleted segments were
	// wholly below it): the log start does not move, the files go.
	return []Action{{Kind: ActionDeleteBefore, Offset: segs[k].BaseOffset, Reasons: reasons}}
}
