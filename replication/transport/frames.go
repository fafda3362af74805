package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Frames (doc.go, "Raft design"): read with bounds on what a peer may
// make this side allocate, written through one buffered writer per
// connection.

type frame struct {
	kind  byte
	reqID uint64
	group []byte // aliases the read buffer
	body  []byte // aliases the read buffer
}

// frameReader is where readFrame reads from: a bufio.Reader, or a
// stallReader that bounds the time a frame takes once begun.
type frameReader interface {
	io.Reader
	begun(n uint32)
	ended()
}

type plainFrames struct{ *bufio.Reader }

func (plainFrames) begun(uint32) {}
func (plainFrames) ended()       {}

// stallReader sets a read deadline when a frame begins and clears it when
// the frame has arrived: between frames a connection may idle.
type stallReader struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *stallReader) begun(n uint32) {
	s.c.SetReadDeadline(time.Now().Add(snapshotTimeout(s.timeout, int64(n))))
}
func (s *stallReader) ended() { s.c.SetReadDeadline(time.Time{}) }

// readFrame reads one frame into buf (grown as needed) and returns it.
// The buffer grows from the bytes received, not from the length the frame
// claims: a peer announcing maxFrameBytes and sending nothing more pins
// at most frameGrowBytes (8 such connections used to hold 1 GiB).
func readFrame(br io.Reader, buf []byte) (frame, []byte, error) {
	r, ok := br.(frameReader)
	if !ok {
		r = plainFrames{br.(*bufio.Reader)}
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	r.begun(n)
	defer r.ended()
	if n < frameHeaderBytes-4+1 || n > maxFrameBytes {
		return frame{}, buf, fmt.Errorf("%w: frame length %d", ErrCodec, n)
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return frame{}, buf, err
		}
	} else {
		var err error
		if buf, err = readGrowing(r, buf[:0], int(n)); err != nil {
			return frame{}, nil, err
		}
	}
	f := frame{kind: buf[0], reqID: binary.BigEndian.Uint64(buf[1:9])}
	gl, k := binary.Uvarint(buf[9:])
	if k <= 0 || gl > maxGroupIDBytes || gl > uint64(len(buf)-9-k) {
		return frame{}, buf, fmt.Errorf("%w: bad group id length", ErrCodec)
	}
	f.group = buf[9+k : 9+k+int(gl)]
	f.body = buf[9+k+int(gl):]
	return f, buf, nil
}

// frameGrowBytes is the most readGrowing allocates ahead of the bytes it
// has received.
const frameGrowBytes = 1 << 20

// readGrowing reads n bytes into buf (reused when large enough), growing
// it at most doubling what has arrived (and by frameGrowBytes at first).
func readGrowing(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) < min(n, frameGrowBytes) {
		buf = make([]byte, 0, min(n, frameGrowBytes))
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		k, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// frameWriter serializes frames onto a connection. Writers queue on wmu;
// the last one in the queue flushes, so frames from many groups written
// at once leave in one syscall. AppendEntries without entries (an idle
// leader's commit-index updates; heartbeats travel coalesced,
// heartbeats.go), and their answers, are written lazily: they
// wait up to heartbeatFlushDelay for other frames to share their syscall
// (replication/doc.go, "Raft timing"); any eager frame flushes them along.
type frameWriter struct {
	c       net.Conn
	timeout time.Duration
	waiting atomic.Int32
	wmu     sync.Mutex
	w       *bufio.Writer // protected by wmu
	armed   bool          // protected by wmu; a lazy flush is scheduled
	werr    error         // protected by wmu; a failed write sticks
}

// heartbeatFlushDelay is how long a lazy frame may wait in the buffer for
// company. Heartbeats no longer need it (they travel coalesced); the lazy
// frames left are idle commit-index updates, a new leader's probes and
// their answers, which a failover waits on: 50 ms here (with the leader
// timing of that attempt) failed 2 of 5 chaos runs, 2 ms never did.
const heartbeatFlushDelay = 2 * time.Millisecond

func (fw *frameWriter) writeMsg(kind byte, reqID uint64, group []byte, msg any) error {
	return fw.writeMsgLazy(kind, reqID, group, msg, false)
}

func (fw *frameWriter) writeMsgLazy(kind byte, reqID uint64, group []byte, msg any, lazy bool) error {
	e := &enc{b: make([]byte, frameHeaderBytes, frameHeaderBytes+64+len(group)+encodedSizeHint(msg)), vec: true}
	e.u64(uint64(len(group)))
	e.b = append(e.b, group...)
	if !encodeRPC(e, msg) {
		return fmt.Errorf("%w: cannot encode %T", ErrCodec, msg)
	}
	if len(e.parts) == 0 {
		return fw.write(kind, reqID, e.b, lazy)
	}
	return fw.writeParts(kind, reqID, append(e.parts, e.b), lazy)
}

func (fw *frameWriter) writeError(reqID uint64, group []byte, msg string) error {
	b := make([]byte, frameHeaderBytes, frameHeaderBytes+binary.MaxVarintLen64+len(group)+len(msg))
	b = binary.AppendUvarint(b, uint64(len(group)))
	b = append(b, group...)
	b = append(b, msg...)
	return fw.write(kindError, reqID, b, false)
}

// write fills in the header of b (frameHeaderBytes reserved at its start)
// and writes it.
func (fw *frameWriter) write(kind byte, reqID uint64, b []byte, lazy bool) error {
	return fw.writeParts(kind, reqID, [][]byte{b}, lazy)
}

// writeParts writes one frame made of parts, in order; the first has
// frameHeaderBytes reserved at its start for the header. Parts larger than
// the buffer's room go to the connection without being copied (bufio
// writes them directly once the buffer is flushed).
func (fw *frameWriter) writeParts(kind byte, reqID uint64, parts [][]byte, lazy bool) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n-4 > maxFrameBytes {
		return fmt.Errorf("replication: frame of %d bytes exceeds %d", n-4, maxFrameBytes)
	}
	b := parts[0]
	binary.BigEndian.PutUint32(b[0:4], uint32(n-4))
	b[4] = kind
	binary.BigEndian.PutUint64(b[5:13], reqID)
	fw.waiting.Add(1)
	fw.wmu.Lock()
	defer fw.wmu.Unlock()
	if fw.werr != nil {
		fw.waiting.Add(-1)
		return fw.werr
	}
	var err error
	for _, p := range parts {
		if len(p) > fw.w.Available() {
			// bufio flushes (or writes p itself) here, not only in
			// flushLocked: the deadline must cover these writes too.
			fw.c.SetWriteDeadline(time.Now().Add(fw.timeout))
		}
		if _, err = fw.w.Write(p); err != nil {
			break
		}
	}
	if fw.waiting.Add(-1) == 0 && err == nil {
		if lazy {
			if !fw.armed {
				fw.armed = true
				time.AfterFunc(heartbeatFlushDelay, fw.lazyFlush)
			}
		} else {
			err = fw.flushLocked()
		}
	}
	if err != nil {
		fw.werr = err
	}
	return err
}

func (fw *frameWriter) flushLocked() error {
	if fw.w.Buffered() == 0 {
		return nil
	}
	fw.c.SetWriteDeadline(time.Now().Add(fw.timeout))
	return fw.w.Flush()
}

func (fw *frameWriter) lazyFlush() {
	fw.wmu.Lock()
	defer fw.wmu.Unlock()
	fw.armed = false
	if fw.werr != nil {
		return
	}
	if err := fw.flushLocked(); err != nil {
		fw.werr = err
		fw.c.Close() // the reader sees it and fails the calls waiting
	}
}
