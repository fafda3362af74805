package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// The wire encoding of hashicorp/raft's RPC structs for the Mux
// (frames.go). Hand-written rather than msgpack (not an allowed
// dependency) or gob (no bound on what a corrupt frame makes it allocate):
// every field in declaration order, integers as uvarints, byte strings as
// uvarint length + bytes, booleans as one byte. Every length is checked
// against what is left of the frame before anything is allocated. The
// field order is part of the wire format between brokers: change it only
// together with muxProtocolVersion.

// ErrCodec is a frame that does not decode: the connection that
// carried it is closed.
var ErrCodec = errors.New("replication: bad transport frame")

// enc appends fields to a buffer. With vec set, an entry's data of at
// least vecMinBytes is not copied: what b holds so far and the data are
// moved to parts, and the frame is written from parts then b
// (frameWriter.writeParts), the data straight from where raft keeps it.
type enc struct {
	b     []byte
	vec   bool
	parts [][]byte
}

// vecMinBytes: smaller data is copied (a separate write costs more).
const vecMinBytes = 4 << 10

func (e *enc) u64(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i64(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte) {
	e.u64(uint64(len(v)))
	e.b = append(e.b, v...)
}

// data is bytes for an entry's data (see vec).
func (e *enc) data(v []byte) {
	if !e.vec || len(v) < vecMinBytes {
		e.bytes(v)
		return
	}
	e.u64(uint64(len(v)))
	e.parts = append(e.parts, e.b, v)
	e.b = make([]byte, 0, 64)
}
func (e *enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *enc) header(h raft.RPCHeader) {
	e.u64(uint64(h.ProtocolVersion))
	e.bytes(h.ID)
	e.bytes(h.Addr)
}

// dec reads fields from a frame body; the first error sticks and every
// later read returns zero values.
type dec struct {
	b   []byte
	err error
	// owned: the body is not reused after decoding, so entries' data may
	// alias it (dataBytes).
	owned bool
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCodec, what)
	}
	d.b = nil
}

func (d *dec) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i64() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a copy: frames are read into reused buffers, and raft
// keeps entries (their Data) after the RPC returns.
func (d *dec) bytes() []byte {
	b := d.span()
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// dataBytes is bytes for an entry's data: aliased when the body is owned,
// else a copy.
func (d *dec) dataBytes() []byte {
	if !d.owned {
		return d.bytes()
	}
	return d.span()
}

// span reads a length-prefixed byte string and returns it as it lies in
// the body (capacity cut to its length), nil when empty or on an error.
func (d *dec) span() []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("byte string runs past the frame")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *dec) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("bad bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *dec) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(d.u64()), ID: d.bytes(), Addr: d.bytes()}
}

// done reports the sticky error, or an error if bytes are left over.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	return d.err
}

// minLogBytes is the least an encoded raft.Log takes (six one-byte
// fields); it bounds the entry count a frame can claim.
const minLogBytes = 6

func encodeLog(e *enc, l *raft.Log) {
	e.u64(l.Index)
	e.u64(l.Term)
	e.u64(uint64(l.Type))
	e.data(l.Data)
	e.bytes(l.Extensions)
	if l.AppendedAt.IsZero() {
		e.i64(0)
	} else {
		e.i64(l.AppendedAt.UnixNano())
	}
}

// EncodeLog appends l's encoding (as in an AppendEntries frame) to b: a
// broker's metadata store keeps the raft log in the same form.
func EncodeLog(b []byte, l *raft.Log) []byte {
	e := &enc{b: b}
	encodeLog(e, l)
	return e.b
}

// DecodeLog decodes what EncodeLog encoded, all of body.
func DecodeLog(body []byte) (*raft.Log, error) {
	d := &dec{b: body}
	l := decodeLog(d)
	if err := d.done(); err != nil {
		return nil, err
	}
	return l, nil
}

func decodeLog(d *dec) *raft.Log {
	l := &raft.Log{Index: d.u64(), Term: d.u64()}
	t := d.u64()
	if t > 255 {
		d.fail("bad log type")
	}
	l.Type = raft.LogType(t)
	l.Data = d.dataBytes()
	l.Extensions = d.bytes()
	if ns := d.i64(); ns != 0 {
		l.AppendedAt = time.Unix(0, ns)
	}
	return l
}

// encodedSizeHint is about how many bytes encodeRPC appends to e.b for v
// in vec mode: growing the buffer by appends copied it again and again.
func encodedSizeHint(v any) int {
	switch m := v.(type) {
	case *raft.AppendEntriesRequest:
		n := 64 + len(m.ID) + len(m.Addr) + len(m.Leader)
		for _, l := range m.Entries {
			n += 48 + len(l.Extensions)
			if len(l.Data) < vecMinBytes {
				n += len(l.Data)
			}
		}
		return n
	case *rawMsg:
		return 16 + len(m.b)
	}
	return 64
}

// rawMsg is an opaque body (forwarded broker requests, forward.go).
type rawMsg struct{ b []byte }

// encodeRPC appends the encoding of one of raft's request or response
// structs; it returns false for a type it does not know.
func encodeRPC(e *enc, v any) bool {
	switch m := v.(type) {
	case *rawMsg:
		e.bytes(m.b)
	case *beatRequests:
		encodeBeats(e, m)
	case *beatAnswers:
		encodeBeatAnswers(e, m)
	case *raft.AppendEntriesRequest:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.bytes(m.Leader)
		e.u64(m.PrevLogEntry)
		e.u64(m.PrevLogTerm)
		e.u64(uint64(len(m.Entries)))
		for _, l := range m.Entries {
			encodeLog(e, l)
		}
		e.u64(m.LeaderCommitIndex)
	case *raft.AppendEntriesResponse:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.u64(m.LastLog)
		e.bool(m.Success)
		e.bool(m.NoRetryBackoff)
	case *raft.RequestVoteRequest:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.bytes(m.Candidate)
		e.u64(m.LastLogIndex)
		e.u64(m.LastLogTerm)
		e.bool(m.LeadershipTransfer)
	case *raft.RequestVoteResponse:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.bytes(m.Peers)
		e.bool(m.Granted)
	case *raft.RequestPreVoteRequest:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.u64(m.LastLogIndex)
		e.u64(m.LastLogTerm)
	case *raft.RequestPreVoteResponse:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.bool(m.Granted)
	case *raft.InstallSnapshotRequest:
		e.header(m.RPCHeader)
		e.u64(uint64(m.SnapshotVersion))
		e.u64(m.Term)
		e.bytes(m.Leader)
		e.u64(m.LastLogIndex)
		e.u64(m.LastLogTerm)
		e.bytes(m.Peers)
		e.bytes(m.Configuration)
		e.u64(m.ConfigurationIndex)
		e.i64(m.Size)
	case *raft.InstallSnapshotResponse:
		e.header(m.RPCHeader)
		e.u64(m.Term)
		e.bool(m.Success)
	case *raft.TimeoutNowRequest:
		e.header(m.RPCHeader)
	case *raft.TimeoutNowResponse:
		e.header(m.RPCHeader)
	default:
		return false
	}
	return true
}

// decodeRPC fills v (a pointer to one of raft's structs) from body.
func decodeRPC(body []byte, v any) error {
	return decodeRPCFrom(&dec{b: body}, v)
}

// decodeAppendEntriesOwned is decodeRPC for a body the caller never reuses:
// the data of a lone entry aliases it instead of being copied (a follower
// receives most batches this way under load); several entries are copied
// each, so that each is a buffer of its own.
func decodeAppendEntriesOwned(body []byte, m *raft.AppendEntriesRequest) error {
	return decodeRPCFrom(&dec{b: body, owned: true}, m)
}

func decodeRPCFrom(d *dec, v any) error {
	switch m := v.(type) {
	case *rawMsg:
		m.b = d.bytes()
	case *beatRequests:
		decodeBeats(d, m)
	case *beatAnswers:
		decodeBeatAnswers(d, m)
	case *raft.AppendEntriesRequest:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.Leader = d.bytes()
		m.PrevLogEntry = d.u64()
		m.PrevLogTerm = d.u64()
		n := d.u64()
		if n > uint64(len(d.b))/minLogBytes {
			d.fail("entry count larger than the frame")
			n = 0
		}
		if n > 0 {
			m.Entries = make([]*raft.Log, 0, n)
		}
		if n != 1 {
			// Aliasing one of several entries would keep the whole frame
			// alive as long as that entry (replication's partition_memo.go keeps some).
			d.owned = false
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			m.Entries = append(m.Entries, decodeLog(d))
		}
		m.LeaderCommitIndex = d.u64()
	case *raft.AppendEntriesResponse:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.LastLog = d.u64()
		m.Success = d.bool()
		m.NoRetryBackoff = d.bool()
	case *raft.RequestVoteRequest:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.Candidate = d.bytes()
		m.LastLogIndex = d.u64()
		m.LastLogTerm = d.u64()
		m.LeadershipTransfer = d.bool()
	case *raft.RequestVoteResponse:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.Peers = d.bytes()
		m.Granted = d.bool()
	case *raft.RequestPreVoteRequest:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.LastLogIndex = d.u64()
		m.LastLogTerm = d.u64()
	case *raft.RequestPreVoteResponse:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.Granted = d.bool()
	case *raft.InstallSnapshotRequest:
		m.RPCHeader = d.header()
		m.SnapshotVersion = raft.SnapshotVersion(d.u64())
		m.Term = d.u64()
		m.Leader = d.bytes()
		m.LastLogIndex = d.u64()
		m.LastLogTerm = d.u64()
		m.Peers = d.bytes()
		m.Configuration = d.bytes()
		m.ConfigurationIndex = d.u64()
		m.Size = d.i64()
		if m.Size < 0 {
			d.fail("negative snapshot size")
		}
	case *raft.InstallSnapshotResponse:
		m.RPCHeader = d.header()
		m.Term = d.u64()
		m.Success = d.bool()
	case *raft.TimeoutNowRequest:
		m.RPCHeader = d.header()
	case *raft.TimeoutNowResponse:
		m.RPCHeader = d.header()
	default:
		return fmt.Errorf("%w: cannot decode %T", ErrCodec, v)
	}
	return d.done()
}
