package protocol

import (
	"bufio"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
)

// A ShareFetch response is, like a Fetch response, mostly stored record
// batches: kmsg's AppendTo copies them into one growing buffer (most of a
// broker's CPU under share consumers: growslice and memmove of megabytes
// per response). encodeShareFetchPieces frames the response as pieces for
// writev instead, the record sets as regions of the segment files
// (sendfile) or as the read buffers themselves, never copied again. Only
// what handleShareFetch produces is encoded here (no unknown tagged
// fields); anything else falls back to kmsg.
// TestEncodeShareFetchMatchesKmsg checks the bytes are identical to kmsg's.

// shareFetchResponse is a ShareFetch response with record sets held as
// regions (released once written, or when the connection drops it).
type shareFetchResponse struct {
	*kmsg.ShareFetchResponse
	regions map[regionKey]*log.Region
}

func (r *shareFetchResponse) release() {
	for _, rg := range r.regions {
		rg.Release()
	}
}

// shareRegionKey names a partition's record set in a ShareFetch response.
func shareRegionKey(k shareTPKey) regionKey {
	return regionKey{topicID: k.topicID, partition: k.partition}
}

// withShareRegions returns resp, wrapped with regions when there are any.
func withShareRegions(resp *kmsg.ShareFetchResponse, regions map[regionKey]*log.Region) kmsg.Response {
	if len(regions) == 0 {
		return resp
	}
	return &shareFetchResponse{ShareFetchResponse: resp, regions: regions}
}

// shareFetchEncodable reports whether encodeShareFetchPieces can frame r.
func shareFetchEncodable(r *kmsg.ShareFetchResponse) bool {
	if r.Version < 1 || r.UnknownTags.Len() > 0 {
		return false
	}
	for i := range r.NodeEndpoints {
		if r.NodeEndpoints[i].UnknownTags.Len() > 0 {
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
			if p.UnknownTags.Len() > 0 || p.CurrentLeader.UnknownTags.Len() > 0 {
				return false
			}
			for k := range p.AcquiredRecords {
				if p.AcquiredRecords[k].UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// encodeShareFetchPieces frames r (size prefix, correlation ID, header
// tags, body: every ShareFetch version is flexible) as pieces for writev;
// a partition with a region in regions is framed with the region's length
// and its bytes follow as the region (read into the current piece when
// small). The error is a failed segment read. The caller frees the writer
// once its pieces are written.
func encodeShareFetchPieces(corr int32, r *kmsg.ShareFetchResponse, regions map[regionKey]*log.Region) (*pieceWriter, error) {
	w := newPieceWriter()
	w.put(0, 0, 0, 0) // size, patched below; not counted
	w.total = 0
	w.i32(corr)
	w.put(0) // response header tags
	w.i32(r.ThrottleMillis)
	w.i16(r.ErrorCode)
	w.nullableStr(r.ErrorMessage)
	w.i32(r.AcquisitionLockTimeoutMillis)
	w.arrayLen(len(r.Topics), true)
	for i := range r.Topics {
		t := &r.Topics[i]
		w.put(t.TopicID[:]...)
		w.arrayLen(len(t.Partitions), true)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			w.i32(p.Partition)
			w.i16(p.ErrorCode)
			w.nullableStr(p.ErrorMessage)
			w.i16(p.AcknowledgeErrorCode)
			w.nullableStr(p.AcknowledgeErrorMessage)
			w.i32(p.CurrentLeader.LeaderID)
			w.i32(p.CurrentLeader.LeaderEpoch)
			w.put(0) // leader tags
			if rg := regions[regionKey{topicID: t.TopicID, partition: p.Partition}]; rg != nil {
				w.uvarint(uint64(rg.Len) + 1)
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
				w.nullableBytes(p.Records, true)
			}
			w.arrayLen(len(p.AcquiredRecords), true)
			for k := range p.AcquiredRecords {
				a := &p.AcquiredRecords[k]
				w.i64(a.FirstOffset)
				w.i64(a.LastOffset)
				w.i16(a.DeliveryCount)
				w.put(0)
			}
			w.put(0) // partition tags
		}
		w.put(0) // topic tags
	}
	w.arrayLen(len(r.NodeEndpoints), true)
	for i := range r.NodeEndpoints {
		ne := &r.NodeEndpoints[i]
		w.i32(ne.NodeID)
		w.str(ne.Host, true)
		w.i32(ne.Port)
		w.nullableStr(ne.Rack)
		w.put(0)
	}
	w.put(0) // response tags
	w.bufs = append(w.bufs, w.cur)
	binary.BigEndian.PutUint32(w.bufs[0], uint32(w.total))
	w.first = w.bufs[0]
	return w, nil
}

// nullableStr writes a compact nullable string.
func (w *pieceWriter) nullableStr(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.str(*s, true)
}

// writeShareFetch writes a ShareFetch response as pieces (writev), its
// record sets in regions by sendfile (encodeShareFetchPieces); false when
// the connection must close.
func (c *conn) writeShareFetch(w *bufio.Writer, p *pending, r *kmsg.ShareFetchResponse, regions map[regionKey]*log.Region) bool {
	if p.err != nil {
		c.s.metrics.errorNamed(p.key, connClosedError)
		w.Flush()
		return false
	}
	if w.Flush() != nil {
		return false
	}
	c.s.metrics.countErrors(p.key, r)
	fw, err := encodeShareFetchPieces(p.corr, r, regions)
	var n int64
	if err == nil {
		n, err = writeFetch(c.nc, fw)
	} else {
		c.log.Error("closing connection: share fetch response", "err", err)
	}
	fw.free()
	putBody(p.body)
	if err != nil {
		return false
	}
	c.s.metrics.written(p.key, p.start, int(n))
	return true
}
