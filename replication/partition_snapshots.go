package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/segment"
)

// A partition group's raft.SnapshotStore (doc.go, "Partition snapshots").
// A partition snapshot at raft index i says "everything up to offset o is
// in the segments": what is stored is only that position (and the log
// start then), a few bytes, in the metadata group's snapshot format
// (raftstore.SnapshotStore). The record data is never written twice.
//
// When the leader must send a snapshot (a follower is behind the leader's
// raft log, or the entries it needs were removed by retention or
// compaction), Open returns a stream generated from the segments:
//
//	+------+-----------+-----------+------------+-----------------------+
//	| kind | end (i64) | start i64 | first i64  | batches [first, end)  |
//	|  1   |           | log start | base of 1st|  as stored, in order  |
//	+------+-----------+-----------+------------+-----------------------+
//
// and the follower's sink applies it as it arrives: it marks an install
// in progress in the group's stable store, resets the partition to the
// first batch's base (log.Partition.ResetTo), appends every batch as the
// leader stored it (AppendReplica), and at Close commits, fsyncs, records
// the position as its own snapshot and clears the mark. A broker that
// crashes mid-install finds the mark at start and resets the partition to
// empty, so raft fetches everything again. The position a snapshot stores
// locally is the same header with kind 0 and no batches.
//
// The partition's share state (partition_share_state.go) is the one thing a
// snapshot holds beyond the position: when the registry is not empty, the
// header's kind is 2 (local) or 3 (transfer) and a share section follows
// the header, before any batch:
//
//	+-------------+----------------------------------------+
//	| length (u32)| sharepart.Registry.Snapshot() bytes    |
//	+-------------+----------------------------------------+
//
// A snapshot of kind 0 or 1 (every snapshot written before share state
// existed, and those of partitions without any) restores an empty
// registry; readers before share state refuse kinds 2 and 3 rather than
// drop the section.

const (
	snapKindLocal    = 0
	snapKindTransfer = 1
	// snapKindShare is added to a kind whose header is followed by a share
	// section (kinds 2 and 3).
	snapKindShare   = 2
	snapHeaderBytes = 1 + 8 + 8
	snapXferHeader  = snapHeaderBytes + 8
	// snapShareLenBytes is the share section's length prefix.
	snapShareLenBytes = 4
	// maxShareSection bounds a share section (a registry holds at most
	// group.share.partition.max.record.locks in-flight records per group,
	// compacted into runs: far below this).
	maxShareSection = 256 << 20
	// installKey marks an interrupted snapshot install in the stable store.
	installKey = "StrataInstalling"
	// maxInstallBatch bounds one batch of an install stream (the largest
	// batch a topic can hold, with room).
	maxInstallBatch = 128 << 20
	// snapReadChunk is how much of the segments one read of a transfer
	// stream takes.
	snapReadChunk = 1 << 20
)

// snapshotInstalls counts completed installs in this process (tests and
// the broker's metrics read it).
var snapshotInstalls atomic.Int64

var errSnapshotChanged = errors.New("replication: partition changed under a snapshot transfer")

// partitionSnapshots is one partition group's snapshot store.
type partitionSnapshots struct {
	*raftstore.SnapshotStore
	lp     *log.Partition
	logger *slog.Logger
	stable *raftstore.StableFile
	// store is the group's log store, set before raft starts: an install
	// re-anchors it.
	store *partitionStore
	// onInstall is called after every completed install, with its index:
	// once raft has finished the install, the group restarts so raft
	// re-reads its log store; may be nil.
	onInstall func(index uint64)
	mu        sync.Mutex
}

var _ raft.SnapshotStore = (*partitionSnapshots)(nil)

func openPartitionSnapshots(fsys segment.FS, dir string, lp *log.Partition, stable *raftstore.StableFile, logger *slog.Logger) (*partitionSnapshots, error) {
	s, err := raftstore.OpenSnapshotStore(fsys, dir, 2)
	if err != nil {
		return nil, err
	}
	return &partitionSnapshots{SnapshotStore: s, lp: lp, stable: stable, logger: logger}, nil
}

// snapPosition is a decoded snapshot header.
type snapPosition struct {
	kind  byte  // snapKindLocal or snapKindTransfer (the share bit is share's)
	end   int64 // every batch below end is in the segments
	start int64 // the log start offset
	first int64 // transfer only: base offset of the first batch
	// share is the share registry's snapshot (nil: none, an empty
	// registry).
	share []byte
}

func (h snapPosition) encode() []byte {
	b := make([]byte, 0, snapXferHeader+snapShareLenBytes+len(h.share))
	kind := h.kind
	if h.share != nil {
		kind |= snapKindShare
	}
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, uint64(h.end))
	b = binary.BigEndian.AppendUint64(b, uint64(h.start))
	if h.kind == snapKindTransfer {
		b = binary.BigEndian.AppendUint64(b, uint64(h.first))
	}
	if h.share != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.share)))
		b = append(b, h.share...)
	}
	return b
}

// snapHeaderNeed returns how many bytes the header that head begins
// takes, as far as head tells (the kind byte, then the share section's
// length): a caller reads up to it and asks again until head is that long.
func snapHeaderNeed(head []byte) (int, error) {
	if len(head) == 0 {
		return 1, nil
	}
	kind := head[0]
	if kind > snapKindTransfer|snapKindShare {
		return 0, fmt.Errorf("%w: snapshot kind %d", errPartitionStore, kind)
	}
	n := snapHeaderBytes
	if kind&^snapKindShare == snapKindTransfer {
		n = snapXferHeader
	}
	if kind&snapKindShare == 0 {
		return n, nil
	}
	if len(head) < n+snapShareLenBytes {
		return n + snapShareLenBytes, nil
	}
	size := binary.BigEndian.Uint32(head[n:])
	if size > maxShareSection {
		return 0, fmt.Errorf("%w: snapshot share section of %d bytes", errPartitionStore, size)
	}
	return n + snapShareLenBytes + int(size), nil
}

// readSnapPosition reads a header (any kind) from r.
func readSnapPosition(r io.Reader) (snapPosition, error) {
	var head []byte
	for {
		need, err := snapHeaderNeed(head)
		if err != nil {
			return snapPosition{}, err
		}
		if len(head) == need {
			break
		}
		// Grown a piece at a time: a corrupt length allocates no more
		// than r holds (and at most maxShareSection).
		more := min(need-len(head), 1<<20)
		head = append(head, make([]byte, more)...)
		if _, err := io.ReadFull(r, head[len(head)-more:]); err != nil {
			return snapPosition{}, fmt.Errorf("%w: snapshot header: %v", errPartitionStore, err)
		}
	}
	return parseSnapPosition(head)
}

// parseSnapPosition decodes a whole header (snapHeaderNeed's length).
func parseSnapPosition(b []byte) (snapPosition, error) {
	if need, err := snapHeaderNeed(b); err != nil || need != len(b) {
		return snapPosition{}, fmt.Errorf("%w: snapshot header of %d bytes (%v)", errPartitionStore, len(b), err)
	}
	h := snapPosition{kind: b[0] &^ snapKindShare, end: int64(binary.BigEndian.Uint64(b[1:])), start: int64(binary.BigEndian.Uint64(b[9:]))}
	n := snapHeaderBytes
	if h.kind == snapKindTransfer {
		h.first = int64(binary.BigEndian.Uint64(b[snapHeaderBytes:]))
		n = snapXferHeader
	}
	if b[0]&snapKindShare != 0 {
		h.share = b[n+snapShareLenBytes:]
	}
	if h.end < 0 || h.start < 0 || h.first < 0 || h.start > h.end {
		return snapPosition{}, fmt.Errorf("%w: snapshot header end %d start %d first %d", errPartitionStore, h.end, h.start, h.first)
	}
	return h, nil
}

// position reads the position a stored snapshot holds.
func (s *partitionSnapshots) position(id string) (*raft.SnapshotMeta, snapPosition, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, snapPosition{}, err
	}
	defer rc.Close()
	h, err := readSnapPosition(rc)
	return meta, h, err
}

// Open returns the snapshot as a transfer stream over the segments. Raft
// opens a snapshot to send it, and at start to restore it (Restore reads
// the header only).
func (s *partitionSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, pos, err := s.position(id)
	if err != nil {
		return nil, nil, err
	}
	from := max(pos.start, s.lp.LogStartOffset())
	if from > pos.end {
		return nil, nil, fmt.Errorf("%w: snapshot up to %d, but the log starts at %d now", errSnapshotChanged, pos.end, from)
	}
	size, first, err := s.lp.SpanBytes(from, pos.end)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errSnapshotChanged, err)
	}
	hdr := snapPosition{kind: snapKindTransfer, end: pos.end, start: from, first: first, share: pos.share}
	enc := hdr.encode()
	m := *meta
	m.Size = int64(len(enc)) + size
	return &m, &transferReader{lp: s.lp, hdr: enc, cursor: first, end: pos.end, left: size}, nil
}

// transferReader streams the batches [cursor, end) after a header.
type transferReader struct {
	lp     *log.Partition
	hdr    []byte
	buf    []byte
	cursor int64
	end    int64
	left   int64 // batch bytes still to send (SpanBytes at Open)
}

func (t *transferReader) Read(p []byte) (int, error) {
	if len(t.hdr) > 0 {
		n := copy(p, t.hdr)
		t.hdr = t.hdr[n:]
		return n, nil
	}
	if len(t.buf) == 0 {
		if t.left == 0 {
			return 0, io.EOF
		}
		rr, err := t.lp.ReadUncommitted(t.cursor, snapReadChunk)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", errSnapshotChanged, err)
		}
		recs := rr.Records
		whole := 0
		for whole+segment.HeaderSize <= len(recs) {
			h, err := segment.ParseHeader(recs[whole:])
			if err != nil || h.LastOffset() >= t.end {
				break
			}
			whole += int(h.Size())
			t.cursor = h.LastOffset() + 1
		}
		if whole == 0 || int64(whole) > t.left {
			return 0, fmt.Errorf("%w: at offset %d", errSnapshotChanged, t.cursor)
		}
		t.buf = recs[:whole]
		t.left -= int64(whole)
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}

func (t *transferReader) Close() error { return nil }

// Create returns a sink for a local snapshot (the FSM persists a kind 0
// header, kind 2 with its share section) or for an install (raft copies the leader's transfer stream).
func (s *partitionSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	inner, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &partitionSink{s: s, inner: inner, index: index}, nil
}

// partitionSink parses what is written to it. Used by one goroutine.
type partitionSink struct {
	s       *partitionSnapshots
	inner   raft.SnapshotSink
	index   uint64
	head    []byte // header bytes so far
	hdr     *snapPosition
	pending []byte // transfer: bytes of an incomplete batch
	reset   bool   // the partition was reset for this install
	closed  bool
	err     error
}

func (k *partitionSink) ID() string { return k.inner.ID() }

func (k *partitionSink) Write(p []byte) (int, error) {
	if k.err != nil {
		return 0, k.err
	}
	n := len(p)
	for k.hdr == nil {
		need, err := snapHeaderNeed(k.head)
		if err != nil {
			k.err = err
			return 0, err
		}
		if len(k.head) < need {
			if len(p) == 0 {
				return n, nil
			}
			take := min(need-len(k.head), len(p))
			k.head = append(k.head, p[:take]...)
			p = p[take:]
			continue
		}
		h, err := parseSnapPosition(k.head)
		if err != nil {
			k.err = err
			return 0, err
		}
		k.hdr = &h
		if h.kind == snapKindTransfer {
			if err := k.beginInstall(); err != nil {
				k.err = err
				return 0, err
			}
		}
	}
	if k.hdr.kind == snapKindLocal {
		if len(p) > 0 {
			k.err = fmt.Errorf("%w: data after a local snapshot header", errPartitionStore)
			return 0, k.err
		}
		return n, nil
	}
	if err := k.appendBatches(p); err != nil {
		k.err = err
		return 0, err
	}
	return n, nil
}

// beginInstall marks the install and resets the partition.
func (k *partitionSink) beginInstall() error {
	s := k.s
	if err := s.stable.SetUint64([]byte(installKey), 1); err != nil {
		return err
	}
	if err := s.lp.ResetTo(k.hdr.first); err != nil {
		return err
	}
	k.reset = true
	s.logger.Info("installing a partition snapshot from the leader", "partition", s.lp.TopicPartition().String(),
		"first", k.hdr.first, "end", k.hdr.end, "log_start", k.hdr.start)
	return nil
}

// appendBatches appends every whole batch in pending+p.
func (k *partitionSink) appendBatches(p []byte) error {
	data := p
	if len(k.pending) > 0 {
		k.pending = append(k.pending, p...)
		data = k.pending
	}
	for len(data) >= segment.LogOverhead {
		size := int64(int32(binary.BigEndian.Uint32(data[segment.OffBatchLength:]))) + segment.LogOverhead
		if size < segment.HeaderSize || size > maxInstallBatch {
			return fmt.Errorf("%w: install stream batch of %d bytes", errPartitionStore, size)
		}
		if int64(len(data)) < size {
			break
		}
		if _, err := k.s.lp.AppendReplica(data[:size]); err != nil {
			return fmt.Errorf("%w: install: %w", errPartitionStore, err)
		}
		data = data[size:]
	}
	k.pending = append(k.pending[:0:0], data...)
	return nil
}

func (k *partitionSink) Cancel() error {
	err := k.inner.Cancel()
	if k.reset {
		// The partition holds part of the leader's log: raft's view of
		// this replica's log no longer holds; an empty store makes the
		// leader send a snapshot again (the mark stays until one lands).
		k.s.store.resetTo(0, k.s.lp.Offsets().LogEnd)
		k.s.logger.Warn("partition snapshot install cancelled", "partition", k.s.lp.TopicPartition().String(), "err", k.err)
	}
	return err
}

func (k *partitionSink) Close() error {
	if k.closed {
		return nil // raft closes a sink again after Persist did
	}
	k.closed = true
	if k.err != nil {
		k.Cancel()
		return k.err
	}
	if k.hdr == nil {
		k.Cancel()
		return fmt.Errorf("%w: snapshot without a header", errPartitionStore)
	}
	s := k.s
	h := *k.hdr
	if h.kind == snapKindTransfer {
		lp := s.lp
		if len(k.pending) > 0 || lp.Offsets().LogEnd != h.end && h.first < h.end {
			k.err = fmt.Errorf("%w: install stream ended at %d, want %d", errPartitionStore, lp.Offsets().LogEnd, h.end)
			k.Cancel()
			return k.err
		}
		if h.first >= h.end {
			// Nothing to send: the leader's log is empty below end.
			if err := lp.ResetTo(h.end); err != nil {
				k.Cancel()
				return err
			}
		}
		lp.Commit(h.end)
		if h.start > lp.LogStartOffset() {
			if _, err := lp.AdvanceLogStart(h.start); err != nil {
				k.Cancel()
				return err
			}
		}
		if err := lp.Flush(); err != nil {
			k.Cancel()
			return err
		}
		local := snapPosition{kind: snapKindLocal, end: h.end, start: lp.LogStartOffset(), share: h.share}
		if _, err := k.inner.Write(local.encode()); err != nil {
			k.Cancel()
			return err
		}
	} else if _, err := k.inner.Write(k.head); err != nil {
		k.Cancel()
		return err
	}
	if err := k.inner.Close(); err != nil {
		return err
	}
	// The snapshot is durable: what it covers may now be removed.
	s.lp.SetRemovalLimit(h.end)
	if h.kind == snapKindTransfer {
		s.store.resetTo(k.index, h.end)
		if err := s.stable.SetUint64([]byte(installKey), 0); err != nil {
			return err
		}
		snapshotInstalls.Add(1)
		s.logger.Info("partition snapshot installed", "partition", s.lp.TopicPartition().String(), "index", k.index, "end", h.end)
		// Raft keeps its own idea of this replica's last log entry, which
		// an install that reset the partition may have made wrong (an
		// earlier cancelled install, or entries past the snapshot that
		// are gone): the group restarts so raft reads the log store again.
		// A long chaos run showed followers that stopped taking entries
		// after installs; restarting after every install is cheap (an
		// install is rare) and leaves no such state behind.
		if s.onInstall != nil {
			s.onInstall(k.index)
		}
	}
	return nil
}

// finishInterruptedInstall resets a partition whose snapshot install a
// crash interrupted: its log holds part of the leader's, so it starts
// empty and raft sends everything again.
func finishInterruptedInstall(stable *raftstore.StableFile, snaps *partitionSnapshots, lp *log.Partition, logger *slog.Logger) error {
	v, err := stable.GetUint64([]byte(installKey))
	if errors.Is(err, raftstore.ErrNotFound) || (err == nil && v == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	logger.Warn("partition snapshot install was interrupted; the replica starts empty", "partition", lp.TopicPartition().String())
	if err := lp.ResetTo(0); err != nil {
		return err
	}
	if err := snaps.SnapshotStore.RemoveAll(); err != nil {
		return err
	}
	if err := stable.SetUint64([]byte(anchorKey), 0); err != nil {
		return err
	}
	return stable.SetUint64([]byte(installKey), 0)
}
