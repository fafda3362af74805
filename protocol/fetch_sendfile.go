package protocol

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
)

// Fetch record sets by sendfile: a partition's committed batches are
// handed to the socket from the segment file (sendfile(2): page cache to
// socket, no copy through user space) instead of being read into a
// buffer. The handler holds each record set as a log.Region (the segment
// stays readable, even if retention deletes it, until Release); the
// connection's writer sends the framing bytes with writev and each region
// with sendfile, then releases the regions -- also when the connection
// dies first (writeLoop drains its queue). Small record sets
// (< inlineRecordBytes) are read by the encoder straight into the
// response buffer (a syscall costs more than the copy; reading them there
// rather than in the handler copies them once, into a pooled buffer).
// read_committed fetches (which need the aborted transactions
// of the range) and non-OS files (tests' MemFS) use the copy path.

// sentByFile counts record bytes sent with sendfile in this process
// (tests check the path is taken).
var sentByFile atomic.Int64

// regionKey names a partition in a response (by name before v13, by
// topic ID from v13).
type regionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// fetchResponse is a Fetch response with record sets held as regions.
// It is a kmsg.Response (the embedded one's methods); writeLoop sends it.
type fetchResponse struct {
	*kmsg.FetchResponse
	regions map[regionKey]*log.Region
}

func (r *fetchResponse) release() {
	for _, rg := range r.regions {
		rg.Release()
	}
}

// withRegions returns resp, wrapped with the regions of parts when there
// are any.
func withRegions(resp *kmsg.FetchResponse, parts []*fetchPart) kmsg.Response {
	var regions map[regionKey]*log.Region
	for _, fp := range parts {
		if fp.region == nil {
			continue
		}
		if regions == nil {
			regions = map[regionKey]*log.Region{}
		}
		key := regionKey{topic: fp.target.topic, topicID: fp.target.topicID, partition: fp.target.partition}
		if resp.Version >= 13 {
			key.topic = ""
		} else {
			key.topicID = [16]byte{}
		}
		regions[key] = fp.region
		fp.region = nil // owned by the response now
	}
	if regions == nil {
		return resp
	}
	return &fetchResponse{FetchResponse: resp, regions: regions}
}

// readRegion reads fp's record set from one located region, held until
// the response is written: sent with sendfile when large enough, read
// into the response buffer by the encoder otherwise (encodeFetchPieces);
// ok false means the caller reads it the usual way (nothing is held
// then). n is the record bytes taken.
func (s *Server) readRegion(fp *fetchPart, limit int64, first bool) (n int64, ok bool) {
	rg, offs, err := fp.part.ReadRegion(fp.target.fetchOffset, int32(max(limit, 1)))
	if err != nil {
		return 0, false // the copy path reads again and sets the error
	}
	if !first && rg.Len > limit {
		rg.Release()
		return 0, false // the copy path trims to whole batches within limit
	}
	sp := fp.resp
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = offs.HighWatermark, offs.LastStable, offs.LogStart
	sp.RecordBatches = []byte{}
	if rg.Len == 0 {
		return 0, true
	}
	fp.region = rg
	return rg.Len, true
}

// writeFetch writes an encoded response whose record sets may be regions:
// bytes with writev, regions with sendfile when the connection is a TCP
// socket (copied otherwise). It returns the bytes written.
func writeFetch(nc net.Conn, w *pieceWriter) (int64, error) {
	var rc syscall.RawConn
	if tc, ok := nc.(*net.TCPConn); ok {
		rc, _ = tc.SyscallConn()
	}
	var total int64
	next := 0
	for _, ra := range w.regions {
		bufs := w.bufs[next:ra.at]
		next = ra.at
		n, err := bufs.WriteTo(nc)
		total += n
		if err != nil {
			return total, err
		}
		if rc != nil {
			m, ok, err := ra.rg.SendTo(rc)
			total += m
			sentByFile.Add(m)
			if err != nil {
				return total, err
			}
			if ok {
				continue
			}
		}
		b, err := ra.rg.Bytes()
		if err != nil {
			return total, err
		}
		m, err := nc.Write(b)
		total += int64(m)
		if err != nil {
			return total, err
		}
	}
	bufs := w.bufs[next:]
	n, err := bufs.WriteTo(nc)
	total += n
	if err == nil && int(total) != w.total+4 {
		err = io.ErrShortWrite
	}
	return total, err
}

// releaseResponse releases what a response holds (a fetch's regions).
func releaseResponse(r kmsg.Response) {
	switch fr := r.(type) {
	case *fetchResponse:
		fr.release()
	case *shareFetchResponse:
		fr.release()
	}
}
