package protocol

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
)

// A Fetch response is mostly stored record batches. kmsg's AppendTo copies
// them into the response buffer; encodeFetch instead frames the response as
// a list of pieces for writev (net.Buffers), where large record sets are the
// log's own slices, not copies. Only what handleFetch produces is encoded
// here (default tagged fields, no node endpoints); anything else falls back
// to kmsg. TestEncodeFetchMatchesKmsg checks the bytes are identical to
// kmsg's for every version served.

// inlineRecordBytes: record sets up to this size are copied into the
// current piece (a separate iovec costs more than the copy).
const inlineRecordBytes = 16 << 10

// pieceWriter builds a net.Buffers of wire bytes, and the record sets
// that go by sendfile (regions: fetch_sendfile.go), each after the bytes
// in bufs up to its index.
type pieceWriter struct {
	bufs    net.Buffers
	cur     []byte
	total   int
	regions []regionAt
	pooled  *[]byte // the first piece's buffer, from piecePool
	first   []byte  // that piece as framed (writing consumes bufs' elements)
}

// piecePool holds the buffers responses are framed in (the first piece:
// headers and small record sets). A tailing consumer's fetch is a few
// hundred bytes to a few KiB, once per batch produced: without the pool
// each was a fresh allocation, most of the broker's garbage in e2e runs.
var piecePool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledPiece: a buffer grown beyond this by one large response is
// left to the GC rather than pinned in the pool.
const maxPooledPiece = 256 << 10

func newPieceWriter() *pieceWriter {
	p := piecePool.Get().(*[]byte)
	return &pieceWriter{cur: (*p)[:0], pooled: p}
}

// free returns the first piece's buffer to the pool; w is unusable after.
// Call it once the pieces are written.
func (w *pieceWriter) free() {
	if w.pooled == nil {
		return
	}
	if w.first != nil && cap(w.first) <= maxPooledPiece {
		*w.pooled = w.first[:0]
		piecePool.Put(w.pooled)
	}
	w.pooled, w.first, w.bufs, w.cur = nil, nil, nil, nil
}

// regionAt is a region to send after bufs[:at].
type regionAt struct {
	at int
	rg *log.Region
}

// region adds a record set sent from a segment file.
func (w *pieceWriter) region(rg *log.Region) {
	w.bufs = append(w.bufs, w.cur)
	w.cur = make([]byte, 0, 256)
	w.regions = append(w.regions, regionAt{at: len(w.bufs), rg: rg})
	w.total += int(rg.Len)
}

func (w *pieceWriter) raw(b []byte) {
	if len(b) < inlineRecordBytes {
		w.cur = append(w.cur, b...)
	} else {
		w.bufs = append(w.bufs, w.cur, b)
		w.cur = make([]byte, 0, 256)
	}
	w.total += len(b)
}

func (w *pieceWriter) put(b ...byte) { w.cur = append(w.cur, b...); w.total += len(b) }
func (w *pieceWriter) i16(v int16)   { w.put(byte(v>>8), byte(v)) }
func (w *pieceWriter) i32(v int32) {
	w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(v))
	w.total += 4
}
func (w *pieceWriter) i64(v int64) {
	w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(v))
	w.total += 8
}
func (w *pieceWriter) uvarint(v uint64) {
	n := len(w.cur)
	w.cur = binary.AppendUvarint(w.cur, v)
	w.total += len(w.cur) - n
}

func (w *pieceWriter) arrayLen(n int, flexible bool) {
	if flexible {
		w.uvarint(uint64(n) + 1)
	} else {
		w.i32(int32(n))
	}
}

func (w *pieceWriter) str(s string, flexible bool) {
	if flexible {
		w.uvarint(uint64(len(s)) + 1)
	} else {
		w.i16(int16(len(s)))
	}
	w.cur = append(w.cur, s...)
	w.total += len(s)
}

func (w *pieceWriter) nullableBytes(b []byte, flexible bool) {
	switch {
	case b == nil && flexible:
		w.uvarint(0)
	case b == nil:
		w.i32(-1)
	case flexible:
		w.uvarint(uint64(len(b)) + 1)
	default:
		w.i32(int32(len(b)))
	}
	if b != nil {
		w.raw(b)
	}
}

// fetchEncodable reports whether encodeFetch can frame r: only the fields
// handleFetch sets.
func fetchEncodable(r *kmsg.FetchResponse) bool {
	if r.UnknownTags.Len() > 0 {
		return false
	}
	for i := range r.Brokers {
		if r.Brokers[i].UnknownTags.Len() > 0 {
			return false
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 ||
				p.UnknownTags.Len() > 0 {
				return false
			}
			for k := range p.AbortedTransactions {
				if p.AbortedTransactions[k].UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// encodeFetch frames r (size prefix, correlation ID, header tags when
// flexible, body) as pieces for writev.
func encodeFetch(corr int32, r *kmsg.FetchResponse) net.Buffers {
	w, _ := encodeFetchPieces(corr, r, nil) // no regions: no reads, no error
	return w.bufs
}

// encodeFetchPieces is encodeFetch where the record sets named in regions
// come from segment files: a partition with a region is framed with the
// region's length; a small region is read into the current piece here, a
// large one follows the bytes before it (sendfile). The error is a failed
// segment read (the connection closes, as when a sendfile fails). The
// caller frees the writer once its pieces are written.
func encodeFetchPieces(corr int32, r *kmsg.FetchResponse, regions map[regionKey]*log.Region) (*pieceWriter, error) {
	v := r.Version
	flexible := v >= 12
	w := newPieceWriter()
	w.put(0, 0, 0, 0) // size, patched below; not counted
	w.total = 0
	w.i32(corr)
	if flexible {
		w.put(0) // response header tags
	}
	w.i32(r.ThrottleMillis)
	if v >= 7 {
		w.i16(r.ErrorCode)
		w.i32(r.SessionID)
	}
	w.arrayLen(len(r.Topics), flexible)
	for i := range r.Topics {
		t := &r.Topics[i]
		if v <= 12 {
			w.str(t.Topic, flexible)
		} else {
			w.put(t.TopicID[:]...)
		}
		w.arrayLen(len(t.Partitions), flexible)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			w.i32(p.Partition)
			w.i16(p.ErrorCode)
			w.i64(p.HighWatermark)
			w.i64(p.LastStableOffset)
			if v >= 5 {
				w.i64(p.LogStartOffset)
			}
			at := p.AbortedTransactions
			switch {
			case at == nil && flexible:
				w.uvarint(0)
			case at == nil:
				w.i32(-1)
			default:
				w.arrayLen(len(at), flexible)
			}
			for k := range at {
				w.i64(at[k].ProducerID)
				w.i64(at[k].FirstOffset)
				if flexible {
					w.put(0)
				}
			}
			if v >= 11 {
				w.i32(p.PreferredReadReplica)
			}
			k := regionKey{topic: t.Topic, partition: p.Partition}
			if v >= 13 {
				k = regionKey{topicID: t.TopicID, partition: p.Partition}
			}
			if rg := regions[k]; regions != nil && rg != nil {
				if flexible {
					w.uvarint(uint64(rg.Len) + 1)
				} else {
					w.i32(int32(rg.Len))
				}
				if rg.Len < inlineRecordBytes {
					var err error
					if w.cur, err = rg.AppendTo(w.cur); err != nil {
						return w, err
					}
					w.total += int(rg.Len)
				} else {
					w.region(rg)
				}
			} else {
				w.nullableBytes(p.RecordBatches, flexible)
			}
			if flexible {
				// Tagged fields: CurrentLeader (tag 1, KIP-951) when set.
				if cl := p.CurrentLeader; cl.LeaderID != -1 || cl.LeaderEpoch != -1 {
					w.put(1, 1, 9) // one tag: 1, 9 bytes
					w.i32(cl.LeaderID)
					w.i32(cl.LeaderEpoch)
					w.put(0) // its tags
				} else {
					w.put(0)
				}
			}
		}
		if flexible {
			w.put(0) // topic tags
		}
	}
	if flexible {
		// Tagged fields: NodeEndpoints (tag 0, KIP-951) when set.
		if len(r.Brokers) > 0 {
			var b []byte
			b = binary.AppendUvarint(b, uint64(len(r.Brokers))+1)
			for i := range r.Brokers {
				nb := &r.Brokers[i]
				b = binary.BigEndian.AppendUint32(b, uint32(nb.NodeID))
				b = binary.AppendUvarint(b, uint64(len(nb.Host))+1)
				b = append(b, nb.Host...)
				b = binary.BigEndian.AppendUint32(b, uint32(nb.Port))
				if nb.Rack == nil {
					b = append(b, 0)
				} else {
					b = binary.AppendUvarint(b, uint64(len(*nb.Rack))+1)
					b = append(b, *nb.Rack...)
				}
				b = append(b, 0) // broker tags
			}
			w.put(1, 0) // one tag: 0
			w.uvarint(uint64(len(b)))
			w.put(b...)
		} else {
			w.put(0)
		}
	}
	w.bufs = append(w.bufs, w.cur)
	binary.BigEndian.PutUint32(w.bufs[0], uint32(w.total))
	w.first = w.bufs[0]
	return w, nil
}
