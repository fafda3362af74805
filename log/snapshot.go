package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/segment"
)

// Producer state snapshots, written when a segment is rolled, like Kafka's
// <offset>.snapshot: the producer table as of the new segment's base
// offset, so opening a partition replays batch headers only from the
// latest snapshot on instead of from the log start.
//
// File "<20-digit offset>.snapshot", big-endian (on-disk format):
//
//	+--------+---------+------------+-----------+
//	| "STPS" | version | crc32c     | count     |
//	| 4 B    | int16=1 | uint32 (*) | int32     |
//	+--------+---------+------------+-----------+
//	then count entries:
//	+-----------+--------+--------+---------+----+------------------------+
//	| producer  | epoch  | lastTs | lastOff | nb | nb x (firstSeq int32,   |
//	| id int64  | int16  | int64  | int64   |int8| lastSeq int32, firstOff|
//	|           |        |        |         |    | int64, lastOff int64,  |
//	|           |        |        |         |    | maxTs int64)           |
//	+-----------+--------+--------+---------+----+------------------------+
//	version 2 adds, after lastOff, txnFirst int64: the first offset of the
//	producer's open transaction, -1 when none (version 1 has none open);
//	version 3 adds, after txnFirst, coordEpoch int32: the coordinator
//	epoch of the producer's last transaction marker, -1 when none
//	(versions 1 and 2: -1).
//	(*) CRC-32C of everything after the crc field.
const (
	snapshotExt     = ".snapshot"
	snapshotMagic   = "STPS"
	snapshotVersion = 3
	snapHeaderSize  = 4 + 2 + 4 + 4
	snapEntryFixed  = 8 + 2 + 8 + 8 + 1
	snapBatchSize   = 4 + 4 + 8 + 8 + 8
	// maxSnapshotBytes bounds what is read back: maxProducers entries of
	// the largest size.
	maxSnapshotBytes = snapHeaderSize + maxProducers*(snapEntryFixed+8+4+producerBatchesKept*snapBatchSize)
	// snapshotsKept is how many snapshots stay on disk (older ones are
	// removed at roll).
	snapshotsKept = 2
)

var errBadSnapshot = errors.New("log: bad producer snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func snapshotName(off int64) string { return segment.FileName(off, snapshotExt) }

func parseSnapshotName(name string) (int64, bool) {
	if !strings.HasSuffix(name, snapshotExt) {
		return 0, false
	}
	s := strings.TrimSuffix(name, snapshotExt)
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

func encodeSnapshot(ps *producerState) []byte {
	ids := make([]int64, 0, len(ps.m))
	for id := range ps.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	be := binary.BigEndian
	b := make([]byte, snapHeaderSize, snapHeaderSize+len(ids)*(snapEntryFixed+2*snapBatchSize))
	copy(b, snapshotMagic)
	be.PutUint16(b[4:], snapshotVersion)
	be.PutUint32(b[10:], uint32(len(ids)))
	for _, id := range ids {
		e := ps.m[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastTs))
		b = be.AppendUint64(b, uint64(e.lastOff))
		b = be.AppendUint64(b, uint64(e.txnFirst))
		b = be.AppendUint32(b, uint32(e.coordEpoch))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = be.AppendUint32(b, uint32(m.firstSeq))
			b = be.AppendUint32(b, uint32(m.lastSeq))
			b = be.AppendUint64(b, uint64(m.firstOff))
			b = be.AppendUint64(b, uint64(m.lastOff))
			b = be.AppendUint64(b, uint64(m.maxTs))
		}
	}
	be.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

func decodeSnapshot(b []byte) (*producerState, error) {
	be := binary.BigEndian
	if len(b) < snapHeaderSize || string(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: header", errBadSnapshot)
	}
	version := be.Uint16(b[4:])
	if version < 1 || version > snapshotVersion {
		return nil, fmt.Errorf("%w: version %d", errBadSnapshot, version)
	}
	fixed := snapEntryFixed
	if version >= 2 {
		fixed += 8
	}
	if version >= 3 {
		fixed += 4
	}
	if crc32.Checksum(b[10:], castagnoli) != be.Uint32(b[6:]) {
		return nil, fmt.Errorf("%w: crc", errBadSnapshot)
	}
	n := int(int32(be.Uint32(b[10:])))
	if n < 0 || n > maxProducers || n*fixed > len(b)-snapHeaderSize {
		return nil, fmt.Errorf("%w: %d entries", errBadSnapshot, n)
	}
	ps := newProducerState()
	p := b[snapHeaderSize:]
	for i := 0; i < n; i++ {
		if len(p) < fixed {
			return nil, fmt.Errorf("%w: short entry", errBadSnapshot)
		}
		id := int64(be.Uint64(p))
		e := &producerEntry{epoch: int16(be.Uint16(p[8:])), lastTs: int64(be.Uint64(p[10:])), lastOff: int64(be.Uint64(p[18:])), txnFirst: -1, coordEpoch: -1}
		if version >= 2 {
			e.txnFirst = int64(be.Uint64(p[26:]))
			if e.txnFirst < -1 {
				return nil, fmt.Errorf("%w: transaction offset %d", errBadSnapshot, e.txnFirst)
			}
		}
		if version >= 3 {
			e.coordEpoch = int32(be.Uint32(p[34:]))
		}
		nb := int(p[fixed-1])
		p = p[fixed:]
		if nb > producerBatchesKept || len(p) < nb*snapBatchSize {
			return nil, fmt.Errorf("%w: batches", errBadSnapshot)
		}
		for j := 0; j < nb; j++ {
			e.batches = append(e.batches, batchMeta{
				firstSeq: int32(be.Uint32(p)), lastSeq: int32(be.Uint32(p[4:])),
				firstOff: int64(be.Uint64(p[8:])), lastOff: int64(be.Uint64(p[16:])), maxTs: int64(be.Uint64(p[24:])),
			})
			p = p[snapBatchSize:]
		}
		ps.m[id] = e
		ps.noteOngoing(id, e)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadSnapshot)
	}
	return ps, nil
}

// writeSnapshotLocked writes the producer state as of offset off
// atomically (tmp, fsync, rename, dir fsync) and prunes old snapshots.
func (p *Partition) writeSnapshotLocked(off int64, ps *producerState) error {
	if err := segment.ReplaceFile(p.fs, filepath.Join(p.dir, snapshotName(off)), encodeSnapshot(ps)); err != nil {
		return err
	}
	offs, err := p.snapshotOffsets()
	if err != nil {
		return err
	}
	for i := 0; i < len(offs)-snapshotsKept; i++ {
		if err := p.fs.Remove(filepath.Join(p.dir, snapshotName(offs[i]))); err != nil && !isNotExist(err) {
			return err
		}
	}
	return p.fs.SyncDir(p.dir)
}

// snapshotOffsets lists the snapshot files' offsets, ascending.
func (p *Partition) snapshotOffsets() ([]int64, error) {
	ents, err := p.fs.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range ents {
		if off, ok := parseSnapshotName(e.Name); ok && !e.IsDir {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// loadSnapshotLocked returns the newest readable snapshot at an offset
// that is a segment base at or below leo, or (nil, -1). Snapshots above
// the log end (after a truncation or a torn tail) are removed.
func (p *Partition) loadSnapshotLocked() (*producerState, int64) {
	offs, err := p.snapshotOffsets()
	if err != nil {
		p.logger.Warn("cannot list producer snapshots", "err", err)
		return nil, -1
	}
	bases := make(map[int64]bool, len(p.segs))
	for _, s := range p.segs {
		bases[s.Base()] = true
	}
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		path := filepath.Join(p.dir, snapshotName(off))
		if off > p.leo {
			p.fs.Remove(path)
			continue
		}
		if !bases[off] {
			continue
		}
		ps, err := readSnapshotFile(p.fs, path)
		if err != nil {
			p.logger.Warn("ignoring producer snapshot", "file", path, "err", err)
			continue
		}
		return ps, off
	}
	return nil, -1
}

func readSnapshotFile(fsys segment.FS, path string) (*producerState, error) {
	size, err := fsys.Stat(path)
	if err != nil {
		return nil, err
	}
	if size > maxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes", errBadSnapshot, size)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return decodeSnapshot(b)
}

// removeSnapshotsAbove deletes snapshots past off (after a truncation).
func (p *Partition) removeSnapshotsAbove(off int64) {
	offs, err := p.snapshotOffsets()
	if err != nil {
		return
	}
	for _, o := range offs {
		if o > off {
			p.fs.Remove(filepath.Join(p.dir, snapshotName(o)))
		}
	}
}
