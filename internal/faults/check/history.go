// Package check is the checker of the fault harness (internal/faults): a
// pure function from a recorded history (what clients asked for, what
// they were told, and the brokers' final state) to the violations of the
// guarantees Strata makes. It does no I/O; histories can be written by
// hand (the tests do, one per violation) or recorded by a run and saved
// as JSON for checking again.
//
// The guarantees checked (docs/RELIABILITY.md):
//   - lost: every acknowledged produce (acks=all; in a transaction, one
//     whose commit was acknowledged) is in the final log at the offset it
//     was acknowledged with;
//   - moved: an acknowledged record sits at another offset than the one
//     acknowledged;
//   - duplicate: a record (each produced value is unique) is at two
//     offsets of the final log (idempotence broken);
//   - order: two acknowledged records one producer sent to one partition
//     are in the final log in the order they were sent;
//   - offset reused: reads saw two different records at one offset;
//   - truncated read: a read returned a record that is not in the final
//     log at that offset (it was truncated away, or never committed);
//   - skipped: a consumer reading a partition in order went past a record
//     of the final log it should have returned;
//   - aborted read / uncommitted read: a read_committed read returned a
//     record not in the final read_committed log, or one whose
//     transaction's commit had not even been asked for yet;
//   - offset fetch: OffsetFetch returned less than the last acknowledged
//     commit (nor a commit made since);
//   - share redelivered: a share group delivered a record again after an
//     acknowledged ACCEPT or REJECT of it;
//   - stuck: after the faults healed a partition took no acknowledged
//     write within Config.ResumeWithin;
//   - replicas differ: two replicas of a partition hold different bytes at
//     an offset between the largest log start and the high watermark.
package check

import (
	"fmt"
	"time"
)

// OpType says what an Op recorded.
type OpType string

const (
	// Produce is one record sent by a producer: Value (unique in the
	// history), Ok and Offset when acknowledged, Txn when sent in a
	// transaction.
	Produce OpType = "produce"
	// Read is one record a consumer returned: Offset, Value, Isolation;
	// Group for a share group's delivery.
	Read OpType = "read"
	// TxnEnd is the end of a transaction (Txn): Abort or commit, Ok when
	// acknowledged.
	TxnEnd OpType = "txn-end"
	// Commit is an offset commit of Group: Offset, Ok when acknowledged.
	Commit OpType = "commit"
	// OffsetFetch is an OffsetFetch's answer for Group: Offset (-1: none).
	OffsetFetch OpType = "offset-fetch"
	// ShareAck is a share group acknowledgement of Offset: Ack is
	// "accept", "release" or "reject"; Ok when acknowledged.
	ShareAck OpType = "share-ack"
	// Fault is a fault injected (Note says which) at Start, healed at End.
	Fault OpType = "fault"
	// Heal is the end of all faults: Start is when the last one healed.
	Heal OpType = "heal"
)

// Isolation levels of reads.
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// Op is one recorded operation. Start is when the client asked, End when
// it was answered (or gave up).
type Op struct {
	Index     int       `json:"index"`
	Type      OpType    `json:"type"`
	Process   string    `json:"process,omitempty"` // the client
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Value     string    `json:"value,omitempty"`
	Ok        bool      `json:"ok,omitempty"`
	Err       string    `json:"err,omitempty"`
	Txn       string    `json:"txn,omitempty"`
	Abort     bool      `json:"abort,omitempty"`
	Isolation string    `json:"isolation,omitempty"`
	Group     string    `json:"group,omitempty"`
	Ack       string    `json:"ack,omitempty"`
	Note      string    `json:"note,omitempty"`
}

// TP names a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func (o Op) tp() TP { return TP{o.Topic, o.Partition} }

// Rec is one record of a log: its offset and value (or, for a replica's
// batches, a batch's base offset and a digest of its bytes).
type Rec struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// Log is a partition's final state, read after the faults healed and the
// writes stopped: every data record from Start to HighWatermark
// (read_uncommitted), and, when read, the read_committed view.
type Log struct {
	Start         int64 `json:"start"`
	HighWatermark int64 `json:"high_watermark"`
	Records       []Rec `json:"records"`
	// Committed is what a read_committed read returned (nil: not read).
	Committed []Rec `json:"committed,omitempty"`
}

// Replica is one broker's copy of a partition at the end.
type Replica struct {
	Broker        int32  `json:"broker"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Start         int64  `json:"start"`
	HighWatermark int64  `json:"high_watermark"`
	Entries       []Rec  `json:"entries"`
}

// History is a run: its seed and fault schedule (for the report), the
// operations in the order they were recorded, and the final state.
type History struct {
	Seed     int64     `json:"seed"`
	Schedule []string  `json:"schedule"`
	Ops      []Op      `json:"ops"`
	Final    []Final   `json:"final"`
	Replicas []Replica `json:"replicas,omitempty"`
}

// Final is one partition's final log.
type Final struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Log
}

// Add appends op, numbering it.
func (h *History) Add(op Op) {
	op.Index = len(h.Ops)
	h.Ops = append(h.Ops, op)
}

func (o Op) String() string {
	s := fmt.Sprintf("#%d %s %s", o.Index, o.Type, o.Process)
	switch o.Type {
	case Produce:
		s += fmt.Sprintf(" %s %q", o.tp(), o.Value)
		if o.Txn != "" {
			s += " txn " + o.Txn
		}
		if o.Ok {
			s += fmt.Sprintf(" -> ok offset %d", o.Offset)
		} else {
			s += " -> failed " + o.Err
		}
	case Read:
		s += fmt.Sprintf(" %s %s offset %d %q", o.Isolation, o.tp(), o.Offset, o.Value)
		if o.Group != "" {
			s += " share group " + o.Group
		}
	case TxnEnd:
		what := "commit"
		if o.Abort {
			what = "abort"
		}
		s += fmt.Sprintf(" %s %s -> %s", what, o.Txn, okString(o.Ok, o.Err))
	case Commit:
		s += fmt.Sprintf(" group %s %s offset %d -> %s", o.Group, o.tp(), o.Offset, okString(o.Ok, o.Err))
	case OffsetFetch:
		s += fmt.Sprintf(" group %s %s -> %d", o.Group, o.tp(), o.Offset)
	case ShareAck:
		s += fmt.Sprintf(" group %s %s offset %d %s -> %s", o.Group, o.tp(), o.Offset, o.Ack, okString(o.Ok, o.Err))
	case Fault, Heal:
		s += " " + o.Note
	}
	return s + fmt.Sprintf(" [%s..%s]", o.Start.Format("15:04:05.000"), o.End.Format("15:04:05.000"))
}

func okString(ok bool, err string) string {
	if ok {
		return "ok"
	}
	return "failed " + err
}
