package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/strata-io/strata/segment"
)

// Transactions in a partition: the last stable offset (LSO) and the
// aborted-transaction index.
//
// A transactional producer's data batches carry the transactional bit;
// the transaction coordinator ends the transaction in each partition with
// a control batch (a marker) whose one record's key is (version int16 = 0,
// type int16: 0 abort, 1 commit). The producer table (producer_state.go)
// keeps each producer's first offset of its open transaction; the LSO is
// the smallest of those, capped by the high watermark, and also held back
// by a transaction whose marker is not yet committed (Kafka's
// "unreplicated" completed transactions), so a read_committed reader never
// passes a transaction before its outcome is committed.
//
// Every abort marker adds one entry to the aborted-transaction index of the
// segment holding the marker, "<base>.txnindex", in Kafka's format
// (on-disk format; big-endian, 34 bytes per entry, no header):
//
//	+---------+-------------+-------------+------------+------------------+
//	| version | producer id | first offset| last offset| last stable off. |
//	| int16=0 | int64       | int64       | int64      | int64            |
//	+---------+-------------+-------------+------------+------------------+
//
// The entries of every segment are also held in memory (p.aborted, by
// last offset), which is what fetches read; the files make a restart
// cheap: segments before the newest producer snapshot are not replayed,
// so their entries come from their files, while every replayed segment's
// entries (the active one's always) are re-derived from its markers and
// its file rewritten. The active segment's file is appended without
// fsync (a crash loses nothing: it is replayed), and fsync'd at roll.
const (
	txnIndexExt       = ".txnindex"
	txnIndexEntrySize = 34 // on-disk format
	txnIndexVersion   = 0  // on-disk format
	// maxTxnIndexBytes bounds one index file read back (about 2M aborted
	// transactions in one segment).
	maxTxnIndexBytes = 64 << 20
	// maxAbortedInMemory bounds the in-memory aborted index of one
	// partition; past it the oldest entries are dropped from memory (a
	// read_committed fetch that old would then show their records).
	maxAbortedInMemory = 1 << 20

	// Control record types (on-wire format, the key's second int16).
	controlAbort  = 0
	controlCommit = 1
)

var errBadTxnIndex = errors.New("log: bad transaction index")

// AbortedTxn is one aborted transaction of a partition: the producer, the
// first offset it wrote in the transaction and the offset of its abort
// marker, and the LSO once it was aborted.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnSpan is a transaction whose marker is written but not committed.
type txnSpan struct{ first, marker int64 }

// ControlType returns the type of a control batch's marker (0 abort,
// 1 commit), or -1 when b is not a control batch or its first record's key
// cannot be read. Never panics on bad input.
func ControlType(b []byte) int16 { return markerOf(b).typ }

// marker is what a control batch says: its type (controlAbort,
// controlCommit; -1 for a data batch or a control record of another
// kind) and, for a marker, the coordinator epoch of the transaction
// coordinator that wrote it (-1 when its value cannot be read).
type marker struct {
	typ        int16
	coordEpoch int32
}

var notMarker = marker{typ: -1, coordEpoch: -1}

// isEnd reports whether m ends a transaction (an abort or commit marker).
func (m marker) isEnd() bool { return m.typ == controlAbort || m.typ == controlCommit }

// markerOf reads a control batch's first record: its key (version int16 =
// 0, type int16) and, for a marker, its value (version int16, coordinator
// epoch int32: Kafka's EndTransactionMarker). Never panics on bad input.
func markerOf(b []byte) marker {
	if len(b) < segment.HeaderSize {
		return notMarker
	}
	h, err := segment.ParseHeader(b)
	if err != nil || !h.IsControl() || h.Compression() != 0 || h.NumRecords < 1 {
		return notMarker
	}
	rec := b[segment.HeaderSize:min(int64(len(b)), h.Size())]
	// length, attributes int8, timestampDelta, offsetDelta, keyLength,
	// key, valueLength, value
	_, n := uvarint(rec)
	if n <= 0 || len(rec) < n+1 {
		return notMarker
	}
	p := n + 1
	for range 2 {
		_, n = uvarint(rec[p:])
		if n <= 0 {
			return notMarker
		}
		p += n
	}
	key, p, ok := zigzagBytes(rec, p)
	if !ok || len(key) < 4 || binary.BigEndian.Uint16(key) != 0 {
		return notMarker
	}
	m := marker{typ: int16(binary.BigEndian.Uint16(key[2:])), coordEpoch: -1}
	if !m.isEnd() {
		return notMarker
	}
	if val, _, ok := zigzagBytes(rec, p); ok && len(val) >= 6 {
		m.coordEpoch = int32(binary.BigEndian.Uint32(val[2:]))
	}
	return m
}

// zigzagBytes reads a length-prefixed (zigzag varint) byte field of rec at
// p: the field and the position after it; ok false when rec ends first or
// the length is negative (null).
func zigzagBytes(rec []byte, p int) ([]byte, int, bool) {
	if p >= len(rec) {
		return nil, p, false
	}
	l, n := uvarint(rec[p:])
	if n <= 0 {
		return nil, p, false
	}
	p += n
	l = int64(uint64(l)>>1) ^ -(l & 1) // zigzag
	if l < 0 || int64(len(rec)-p) < l {
		return nil, p, false
	}
	return rec[p : p+int(l)], p + int(l), true
}

// uvarint reads an unsigned varint (the zigzag is undone by the caller),
// returning the byte count, or <= 0 when b ends first or it is too long.
func uvarint(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b) && i < 10; i++ {
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u), i + 1
		}
	}
	return 0, -1
}

// markerOfBatch is markerOf for a batch whose header is parsed: a data
// batch is no marker, without looking at its bytes.
func markerOfBatch(h *segment.Header, b []byte) marker {
	if !h.IsControl() {
		return notMarker
	}
	return markerOf(b)
}

// EncodeTxnIndex encodes aborted transactions in the .txnindex format.
func EncodeTxnIndex(ents []AbortedTxn) []byte {
	b := make([]byte, 0, len(ents)*txnIndexEntrySize)
	be := binary.BigEndian
	for _, e := range ents {
		b = be.AppendUint16(b, txnIndexVersion)
		b = be.AppendUint64(b, uint64(e.ProducerID))
		b = be.AppendUint64(b, uint64(e.FirstOffset))
		b = be.AppendUint64(b, uint64(e.LastOffset))
		b = be.AppendUint64(b, uint64(e.LastStableOffset))
	}
	return b
}

// DecodeTxnIndex decodes a .txnindex file. A torn last entry (a crash
// while appending) is ignored; an unknown version or an entry whose
// offsets make no sense is errBadTxnIndex.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b) > maxTxnIndexBytes {
		return nil, fmt.Errorf("%w: %d bytes", errBadTxnIndex, len(b))
	}
	n := len(b) / txnIndexEntrySize
	out := make([]AbortedTxn, 0, n)
	be := binary.BigEndian
	for i := 0; i < n; i++ {
		e := b[i*txnIndexEntrySize:]
		if v := int16(be.Uint16(e)); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: entry %d version %d", errBadTxnIndex, i, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      int64(be.Uint64(e[10:])),
			LastOffset:       int64(be.Uint64(e[18:])),
			LastStableOffset: int64(be.Uint64(e[26:])),
		}
		if a.FirstOffset < 0 || a.LastOffset < a.FirstOffset {
			return nil, fmt.Errorf("%w: entry %d offsets %d..%d", errBadTxnIndex, i, a.FirstOffset, a.LastOffset)
		}
		out = append(out, a)
	}
	return out, nil
}

func txnIndexPath(dir string, base int64) string {
	return filepath.Join(dir, segment.FileName(base, txnIndexExt))
}

// lsoLocked is the last stable offset. Caller holds mu (either mode).
func (p *Partition) lsoLocked() int64 {
	lso := p.hw
	if p.producers != nil {
		if f := p.producers.firstUnstable(); f >= 0 && f < lso {
			lso = f
		}
	}
	for _, s := range p.unstable {
		if s.first < lso {
			lso = s.first
		}
	}
	return max(lso, p.logStart)
}

func (p *Partition) offsetsLocked() Offsets {
	return Offsets{LogStart: p.logStart, HighWatermark: p.hw, LogEnd: p.leo, LastStable: p.lsoLocked()}
}

// endTxnLocked records a transaction a marker just ended (appended or
// replayed): an abort goes to the in-memory index (and, when file is set,
// to the active segment's .txnindex), and a marker at or above the high
// watermark holds the LSO back until it commits.
func (p *Partition) endTxnLocked(e txnEnd, file bool) {
	if e.last >= p.hw {
		p.unstable = append(p.unstable, txnSpan{first: e.first, marker: e.last})
	}
	if !e.abort {
		return
	}
	lso := e.last + 1
	if f := p.producers.firstUnstable(); f >= 0 && f < lso {
		lso = f
	}
	a := AbortedTxn{ProducerID: e.producerID, FirstOffset: e.first, LastOffset: e.last, LastStableOffset: lso}
	p.aborted = append(p.aborted, a)
	if len(p.aborted) > maxAbortedInMemory {
		p.aborted = append(p.aborted[:0], p.aborted[len(p.aborted)-maxAbortedInMemory*7/8:]...)
	}
	if file {
		act := p.segs[len(p.segs)-1]
		if err := p.appendTxnIndexLocked(act.Base(), a); err != nil {
			// Re-derived from the markers at the next open.
			p.logger.Warn("cannot append to transaction index", "base", act.Base(), "err", err)
		}
	}
}

// appendTxnIndexLocked appends one entry to a segment's .txnindex.
func (p *Partition) appendTxnIndexLocked(base int64, a AbortedTxn) error {
	path := txnIndexPath(p.dir, base)
	f, err := p.fs.Open(path)
	if isNotExist(err) {
		f, err = p.fs.Create(path)
	}
	if err != nil {
		return err
	}
	size, err := f.Size()
	if err == nil && size%txnIndexEntrySize != 0 {
		// A torn entry from a crash: cut it so entries stay aligned.
		err = f.Truncate(size - size%txnIndexEntrySize)
	}
	if err == nil {
		_, err = f.Append(EncodeTxnIndex([]AbortedTxn{a}))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeTxnIndexLocked rewrites a segment's .txnindex with the in-memory
// entries whose marker lies in [base, next) (removing it when none) and
// fsyncs it when sync is set.
func (p *Partition) writeTxnIndexLocked(base, next int64, sync bool) error {
	var ents []AbortedTxn
	for _, a := range p.aborted {
		if a.LastOffset >= base && a.LastOffset < next {
			ents = append(ents, a)
		}
	}
	path := txnIndexPath(p.dir, base)
	if len(ents) == 0 {
		if err := p.fs.Remove(path); err != nil && !isNotExist(err) {
			return err
		}
		return nil
	}
	f, err := p.fs.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Append(EncodeTxnIndex(ents))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncTxnIndexLocked fsyncs a segment's .txnindex if it exists (at roll).
func (p *Partition) syncTxnIndexLocked(base int64) error {
	f, err := p.fs.Open(txnIndexPath(p.dir, base))
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeTxnIndex deletes a segment's .txnindex (the segment is gone).
func (p *Partition) removeTxnIndex(base int64) {
	if err := p.fs.Remove(txnIndexPath(p.dir, base)); err != nil && !isNotExist(err) {
		p.logger.Warn("cannot remove transaction index", "base", base, "err", err)
	}
}

// readTxnIndex loads a segment's .txnindex; none is an empty index.
func (p *Partition) readTxnIndex(base int64) ([]AbortedTxn, error) {
	path := txnIndexPath(p.dir, base)
	size, err := p.fs.Stat(path)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if size > maxTxnIndexBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes", errBadTxnIndex, path, size)
	}
	f, err := p.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return DecodeTxnIndex(b)
}

// dropAbortedFromLocked forgets in-memory entries whose marker is at or
// above off (after a truncation).
func (p *Partition) dropAbortedFromLocked(off int64) {
	n := len(p.aborted)
	for n > 0 && p.aborted[n-1].LastOffset >= off {
		n--
	}
	p.aborted = p.aborted[:n]
	k := 0
	for _, s := range p.unstable {
		if s.marker < off {
			p.unstable[k] = s
			k++
		}
	}
	p.unstable = p.unstable[:k]
}

// pruneTxnLocked drops what the high watermark and log start made moot:
// unstable spans whose marker is committed, and aborted entries wholly
// below the log start.
func (p *Partition) pruneTxnLocked() {
	k := 0
	for _, s := range p.unstable {
		if s.marker >= p.hw {
			p.unstable[k] = s
			k++
		}
	}
	p.unstable = p.unstable[:k]
	i := 0
	for i < len(p.aborted) && p.aborted[i].LastOffset < p.logStart {
		i++
	}
	if i > 0 {
		p.aborted = append(p.aborted[:0], p.aborted[i:]...)
	}
}

// abortedRangeLocked lists the aborted transactions that overlap
// [from, upper): marker at or after from, first offset before upper.
func (p *Partition) abortedRangeLocked(from, upper int64) []AbortedTxn {
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for ; i < len(p.aborted); i++ {
		if a := p.aborted[i]; a.FirstOffset < upper {
			out = append(out, a)
		}
	}
	return out
}

// ReadCommitted is Read for read_committed consumers: whole batches
// below the last stable offset, with the aborted transactions that
// overlap them (Fetch's AbortedTransactions), so the client drops the
// aborted transactions' records.
func (p *Partition) ReadCommitted(offset int64, maxBytes int32) (ReadResult, error) {
	res, err := p.read(offset, maxBytes, false)
	if err != nil || len(res.Records) == 0 {
		return res, err
	}
	lso := res.Offsets.LastStable
	end, upper := 0, offset
	for end+segment.HeaderSize <= len(res.Records) {
		h, err := segment.ParseHeader(res.Records[end:])
		if err != nil || h.BaseOffset >= lso || int64(end)+h.Size() > int64(len(res.Records)) {
			break
		}
		end += int(h.Size())
		upper = h.LastOffset() + 1
	}
	res.Records = res.Records[:end]
	if end > 0 {
		p.mu.RLock()
		res.Aborted = p.abortedRangeLocked(offset, upper)
		p.mu.RUnlock()
	}
	return res, nil
}

// AbortedTransactions lists the aborted transactions whose marker is at or
// after from and whose first offset is before upper.
func (p *Partition) AbortedTransactions(from, upper int64) []AbortedTxn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.abortedRangeLocked(from, upper)
}

// ExpireProducers forgets the producers with no open transaction whose
// last batch's timestamp is older than now - expiration
// (producer.id.expiration.ms); it returns how many went.
func (p *Partition) ExpireProducers(nowMs, expirationMs int64) int {
	if expirationMs <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.producers == nil {
		return 0
	}
	return p.producers.expire(nowMs - expirationMs)
}

// replaySegmentLocked replays batch headers of one segment into the
// producer table (control batches are read to learn their type), ending
// transactions as the markers say. Caller holds mu.
func (p *Partition) replaySegmentLocked(s *segment.Segment, each func(pos int64, h *segment.Header)) error {
	var ctrlBuf []byte
	var rerr error
	err := s.ScanHeaders(0, s.Size(), func(pos int64, h *segment.Header) bool {
		ctrl := notMarker
		if h.IsControl() && h.Size() <= 4096 {
			ctrlBuf = append(ctrlBuf[:0], make([]byte, h.Size())...)
			if _, err := s.ReadAt(ctrlBuf, pos); err != nil {
				rerr = err
				return false
			}
			ctrl = markerOf(ctrlBuf)
		}
		if end, ok := p.producers.replay(h, ctrl); ok {
			p.endTxnLocked(end, false)
		}
		if each != nil {
			each(pos, h)
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	return err
}

// MarkerBatch builds the control batch that ends a transaction in a
// partition (Kafka's EndTransactionMarker): attributes control and
// transactional, the producer's ID and epoch, no sequence, one record
// whose key is (version 0, type) and whose value is (version 0,
// coordinatorEpoch). Base offset and leader epoch are stamped at append.
func MarkerBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) []byte {
	typ := uint16(controlAbort)
	if commit {
		typ = controlCommit
	}
	be := binary.BigEndian
	key := be.AppendUint16(be.AppendUint16(nil, 0), typ)
	val := be.AppendUint32(be.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	// record: attributes, timestampDelta 0, offsetDelta 0, key, value, no headers
	var rec []byte
	rec = append(rec, 0, 0, 0)
	rec = appendZigzag(rec, int64(len(key)))
	rec = append(rec, key...)
	rec = appendZigzag(rec, int64(len(val)))
	rec = append(rec, val...)
	rec = appendZigzag(rec, 0)
	body := appendZigzag(nil, int64(len(rec)))
	body = append(body, rec...)

	return segment.AppendBatch(nil, segment.Header{
		LeaderEpoch:   -1, // until stamped
		Attributes:    segment.AttrControl | segment.AttrTransactional,
		BaseTimestamp: nowMs, MaxTimestamp: nowMs,
		ProducerID: producerID, ProducerEpoch: epoch,
		BaseSequence: -1, // no sequence
		NumRecords:   1,
	}, body)
}

func appendZigzag(dst []byte, v int64) []byte {
	u := uint64((v << 1) ^ (v >> 63))
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}
