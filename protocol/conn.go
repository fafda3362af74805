package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/procs"
)

// Limits of the request header (on the wire).
const (
	// maxHeaderTags bounds the tagged fields skipped in a v2 header.
	maxHeaderTags = 64
	// exactAllocBytes: frames up to this size are read into one exact
	// allocation; larger ones grow as bytes arrive, so a client announcing
	// 100 MiB and sending nothing does not pin 100 MiB.
	exactAllocBytes = 1 << 20
)

// conn is one client connection.
type conn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger

	ctx    context.Context // cancelled when the connection dies
	cancel context.CancelFunc

	// queue carries requests from the reader to the writer in request
	// order; its capacity bounds the requests in flight.
	queue chan *pending

	closeOnce sync.Once

	// sec is the listener's security (nil: PLAINTEXT) and auth the
	// connection's authentication state (listener_security.go).
	sec  *ListenerSecurity
	auth connAuth

	// fetchSem lets one Fetch run at a time on a connection, bounding the
	// response memory a connection holds to one fetch (clients send one
	// fetch per broker at a time anyway).
	fetchSem chan struct{}

	// Request bytes held by requests not yet answered: bounded by
	// Server.cfg.MaxRequestBytes, except that one request may always be in
	// flight (so a single maximum-size request is never refused).
	budgetMu   sync.Mutex
	budgetCond *sync.Cond
	inFlight   int64 // protected by budgetMu

	// mutedUntil is when a quota's throttle ends (unix nanoseconds,
	// quotas.go): the reader takes no request before it (KIP-219).
	mutedUntil atomic.Int64

	// Barrier bookkeeping, owned by the reader goroutine (see doc.go).
	lastBarrier  chan struct{}   // done channel of the last state-changing request
	sinceBarrier []chan struct{} // done channels of reads started after it
}

// pending is one request between the reader and the writer.
type pending struct {
	corr int32
	key  int16
	// respFlexible selects the v1 response header (tagged fields).
	respFlexible bool
	clientID     *string       // the header's client ID, for the group handlers
	done         chan struct{} // closed when resp/err are set
	resp         kmsg.Response // nil: nothing to send (acks=0)
	err          error         // non-nil: close the connection at this point
	// body is the pooled buffer holding the request (Produce only,
	// bodypool.go), returned by the writer once the response is written;
	// nil when the body is a plain allocation.
	body *[]byte
	// start is when the request was decoded, for the latency histogram
	// (metrics.go); zero for the connection-closing entries of enqueueErr.
	start time.Time
	// quota is the request's quota state (quotas.go); nil while no quota
	// is configured.
	quota *reqQuota
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		s:        s,
		nc:       nc,
		log:      s.log.With("conn", connSeq.Add(1), "remote", nc.RemoteAddr().String()),
		ctx:      ctx,
		cancel:   cancel,
		queue:    make(chan *pending, s.cfg.MaxInFlightPerConn),
		fetchSem: make(chan struct{}, 1),
	}
	c.budgetCond = sync.NewCond(&c.budgetMu)
	return c
}

// acquire waits until n more request bytes may be held, or the connection
// dies (false).
func (c *conn) acquire(n int64) bool {
	c.budgetMu.Lock()
	defer c.budgetMu.Unlock()
	for c.inFlight > 0 && c.inFlight+n > int64(c.s.cfg.MaxRequestBytes) {
		if c.ctx.Err() != nil {
			return false
		}
		c.budgetCond.Wait()
	}
	c.inFlight += n
	return c.ctx.Err() == nil
}

// release returns n request bytes to the budget.
func (c *conn) release(n int64) {
	c.budgetMu.Lock()
	c.inFlight -= n
	c.budgetMu.Unlock()
	c.budgetCond.Broadcast()
}

// releaseFrame returns a whole frame's n bytes to this connection's budget
// and to the server's (queued.max.request.bytes, limits.go).
func (c *conn) releaseFrame(n int64) {
	c.release(n)
	c.s.budget.release(n)
}

// close tears the connection down at once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
		c.budgetMu.Lock()
		c.budgetMu.Unlock()
		c.budgetCond.Broadcast() // wake an acquire waiting on the budget
	})
}

// stopReading makes the reader stop at its next read (server Close): queued
// requests still get their responses.
func (c *conn) stopReading() {
	c.nc.SetReadDeadline(time.Now())
}

// readLoop reads frames until an error, starting one handler per request.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.queue)
	if !c.tlsHandshake() {
		c.close()
		return
	}
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, body, err := c.readFrame(r)
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrFrameNegative) {
				c.log.Warn("closing connection", "err", err)
				c.enqueueErr(err)
			} else if errors.Is(err, io.EOF) {
				// The client is gone (Kafka closes the channel on EOF):
				// stop handlers still running, such as a long poll.
				c.close()
			} else if !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				var ne net.Error
				if !(errors.As(err, &ne) && ne.Timeout()) {
					c.log.Debug("read failed", "err", err)
				}
			}
			return
		}
		if !c.dispatchFrame(frame, body) {
			return
		}
	}
}

// enqueueErr queues a connection-closing error behind the requests already
// queued, so their responses are written first.
func (c *conn) enqueueErr(err error) {
	p := &pending{key: -1, done: make(chan struct{}), err: err}
	close(p.done)
	select {
	case c.queue <- p:
	case <-c.ctx.Done():
	}
}

// readFrame reads one size-prefixed frame, checking the size before
// allocating. A Produce frame is read into a pooled buffer, returned as
// body (bodypool.go).
func (c *conn) readFrame(r *bufio.Reader) (frame []byte, body *[]byte, err error) {
	// Idle limit; set before checking for Close, which sets a deadline in
	// the past after marking the server draining, so one of the two sees
	// the other.
	c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
	select {
	case <-c.s.draining:
		return nil, nil, net.ErrClosed
	default:
	}
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, nil, err
	}
	// The request has begun: the rest must arrive within the request read
	// timeout (a client trickling a frame or stalling in it is closed).
	c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.RequestReadTimeout))
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 {
		return nil, nil, fmt.Errorf("%w: %d", ErrFrameNegative, n)
	}
	if n > c.s.cfg.MaxRequestBytes {
		return nil, nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, c.s.cfg.MaxRequestBytes)
	}
	if !c.acquire(int64(n)) {
		return nil, nil, net.ErrClosed
	}
	// The server's budget is charged as the buffer grows, from bytes
	// received (limits.go).
	var charged int64
	charge := func(d int) bool {
		if !c.s.budget.acquire(int64(d), c.ctx.Done()) {
			return false
		}
		charged += int64(d)
		return true
	}
	if c.s.cfg.NoBodyPool || n < 2 {
		frame, err = readBody(r, n, charge)
	} else if key, perr := r.Peek(2); perr == nil && binary.BigEndian.Uint16(key) == 0 { // Produce
		frame, body, err = readPooledBody(r, int(n), charge)
	} else {
		frame, err = readBody(r, n, charge)
	}
	if err == nil && charged < int64(n) && !charge(int(int64(n)-charged)) {
		putBody(body)
		frame, body, err = nil, nil, net.ErrClosed
	}
	if err != nil {
		c.release(int64(n))
		c.s.budget.release(charged)
	} else {
		c.s.metrics.bytesIn.Add(float64(n) + 4)
	}
	return frame, body, err
}

// readBody reads an n-byte frame body. charge (nil: none) is called with
// each allocation's size before it is made; false stops the read.
func readBody(r *bufio.Reader, n int32, charge func(int) bool) ([]byte, error) {
	if charge == nil {
		charge = func(int) bool { return true }
	}
	if n <= exactAllocBytes {
		if !charge(int(n)) {
			return nil, net.ErrClosed
		}
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, unexpected(err)
	}
	if !charge(exactAllocBytes) {
		return nil, net.ErrClosed
	}
	buf := make([]byte, 0, exactAllocBytes)
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			next := min(2*cap(buf), int(n))
			if !charge(next - cap(buf)) {
				return nil, net.ErrClosed
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < int(n) {
			return nil, unexpected(err)
		}
	}
	return buf, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header is a parsed request header (v1/v2).
type header struct {
	key, version int16
	corr         int32
	clientID     *string
}

// parseHeader parses a request header; flexible says whether the header is
// v2 (tagged fields follow the client ID). It returns the body.
func parseHeader(frame []byte) (header, []byte, error) {
	var h header
	if len(frame) < 10 {
		return h, nil, ErrShortHeader
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return h, nil, ErrShortHeader
		}
		id := string(rest[:idLen])
		h.clientID = &id
		rest = rest[idLen:]
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section, bounded in count and by the input.
func skipTags(b []byte) ([]byte, error) {
	n, b, ok := uvarint(b)
	if !ok || n > maxHeaderTags {
		return nil, ErrShortHeader
	}
	for range n {
		var size uint64
		if _, b, ok = uvarint(b); !ok {
			return nil, ErrShortHeader
		}
		if size, b, ok = uvarint(b); !ok || size > uint64(len(b)) {
			return nil, ErrShortHeader
		}
		b = b[size:]
	}
	return b, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// flexibleRequest reports whether key at version uses the v2 request header.
func flexibleRequest(key, version int16) bool {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return false
	}
	r.SetVersion(version)
	return r.IsFlexible()
}

// dispatchFrame decodes one frame and starts its handler. It returns false
// when the connection must close (the reason is queued behind the earlier
// responses).
func (c *conn) dispatchFrame(frame []byte, pooled *[]byte) bool {
	procs.Touch() // a request: an idle-shrunk scheduler grows back first
	size := int64(len(frame))
	started := false
	defer func() {
		if !started {
			c.releaseFrame(size)
			putBody(pooled) // nothing was started that could refer to it
		}
	}()
	// A throttled client's next request waits out its mute (quotas.go).
	if !c.waitMuted() {
		return false
	}
	h, body, err := parseHeader(frame)
	if err != nil {
		c.log.Warn("closing connection: bad request header", "err", err)
		c.enqueueErr(err)
		return false
	}
	// Only the failure paths below log: the request's attributes are
	// added there, not to a logger made for every request.
	warn := func(msg string, err error) {
		c.log.Warn(msg, append(reqAttrs(h.key, h.version, h.corr, h.clientID), "err", err)...)
	}

	kreq := kmsg.RequestForKey(h.key)
	if kreq == nil || !apis[h.key].ok {
		err := fmt.Errorf("%w: %d", ErrUnknownKey, h.key)
		warn("closing connection", err)
		c.enqueueErr(err)
		return false
	}
	if !allowedBeforeAuth(h.key) && c.needsAuth() {
		err := fmt.Errorf("%w: %s before SASL authentication", ErrUnauthenticated, kmsg.NameForKey(h.key))
		warn("closing connection", err)
		c.enqueueErr(err)
		return false
	}
	if !isSASLKey(h.key) && c.sessionExpired() {
		err := fmt.Errorf("%w: %s without re-authenticating (connections.max.reauth.ms)", ErrSessionExpired, kmsg.NameForKey(h.key))
		warn("closing connection", err)
		c.enqueueErr(err)
		return false
	}
	supported := versionSupported(h.key, h.version)
	if !supported && h.key != 18 {
		err := fmt.Errorf("%w: %s v%d", ErrUnsupportedVersion, kmsg.NameForKey(h.key), h.version)
		warn("closing connection", err)
		c.enqueueErr(err)
		return false
	}
	// For ApiVersions above our maximum the header version follows the
	// flexibility of that version (v3+ is flexible), as Kafka parses it;
	// the body is not parsed.
	if flexibleRequest(h.key, h.version) {
		if body, err = skipTags(body); err != nil {
			warn("closing connection: bad request header tags", err)
			c.enqueueErr(err)
			return false
		}
	}
	kreq.SetVersion(h.version)
	if supported && h.key == 0 {
		if err := checkProduceCounts(body, h.version, c.s.cfg.ProduceMaxPartitions); err != nil {
			warn("closing connection", err)
			c.enqueueErr(err)
			return false
		}
	}
	if supported {
		if err := checkElementCounts(h.key, h.version, body, MaxRequestPartitions); err != nil {
			warn("closing connection", err)
			c.enqueueErr(err)
			return false
		}
	}
	if supported {
		if err := decodeBody(kreq, body); err != nil {
			err = fmt.Errorf("%w: %s v%d: %v", ErrDecode, kmsg.NameForKey(h.key), h.version, err)
			warn("closing connection", err)
			c.enqueueErr(err)
			return false
		}
	}

	var rq *reqQuota
	if supported {
		rq = c.quotaBefore(kreq, h.clientID, size)
	}
	c.s.metrics.request(h.key, h.version)
	p := &pending{
		quota:        rq,
		start:        time.Now(),
		corr:         h.corr,
		key:          h.key,
		respFlexible: supported && kreq.IsFlexible() && h.key != 18,
		clientID:     h.clientID,
		done:         make(chan struct{}),
		body:         pooled,
	}
	wait := c.barrierWait(p, isBarrier(kreq))
	select {
	case c.queue <- p:
	case <-c.ctx.Done():
		return false
	}
	c.s.wg.Add(1)
	started = true
	go c.run(p, kreq, wait, size)
	if isSASLKey(h.key) {
		return c.awaitSASL(p)
	}
	return true
}

// decodeBody parses a request body. A panic inside the decoder (a bug in
// it, triggered by bad input) is turned into an error: the connection
// closes, the server stays up.
func decodeBody(kreq kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return kreq.ReadFrom(body)
}

// barrierWait records p in the barrier bookkeeping and returns what p must
// wait for before it runs (doc.go, "Ordering between handlers"): every
// request waits for the last state-changing request before it, so it sees
// that change, and state-changing requests run one after another in
// request order.
func (c *conn) barrierWait(p *pending, barrier bool) chan struct{} {
	wait := c.lastBarrier
	if barrier {
		c.lastBarrier = p.done
	}
	return wait
}

// run waits for p's predecessors, runs its handler and marks it done.
func (c *conn) run(p *pending, kreq kmsg.Request, wait chan struct{}, size int64) {
	defer c.s.wg.Done()
	running := &c.s.running[uint8(p.key)]
	running.Add(1)
	defer running.Add(-1)
	defer close(p.done)
	defer c.releaseFrame(size)
	if wait != nil {
		select {
		case <-wait:
		case <-c.ctx.Done():
			p.err = c.ctx.Err()
			return
		}
	}
	if _, ok := kreq.(*kmsg.FetchRequest); ok {
		select {
		case c.fetchSem <- struct{}{}:
			defer func() { <-c.fetchSem }()
		case <-c.ctx.Done():
			p.err = c.ctx.Err()
			return
		}
	}
	defer func() {
		if r := recover(); r != nil {
			c.s.panics.Add(1)
			c.log.Error("handler panicked", append(reqAttrs(p.key, kreq.GetVersion(), p.corr, p.clientID), "panic", r, "stack", string(debug.Stack()))...)
			p.resp, p.err = nil, fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	hctx := c.ctx
	if isSASLKey(p.key) || c.s.cfg.Authorizer != nil { // the principal: SASL, ACLs (authorizer.go)
		hctx = context.WithValue(hctx, connCtxKey{}, c)
	}
	if p.key == 11 || p.key == 68 || p.key == 76 { // JoinGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat record the member's client
		hctx = withClient(hctx, p.clientID, c.nc.RemoteAddr())
	}
	if p.quota != nil {
		hctx = context.WithValue(hctx, reqQuotaKey{}, p.quota)
	}
	began := time.Now()
	p.resp, p.err = c.s.handle(hctx, kreq)
	if p.quota != nil && p.err == nil {
		// Versions before KIP-219 get their response held back.
		if hold := c.quotaAfter(p.quota, p.key, p.resp, time.Since(began)); hold > 0 {
			t := time.NewTimer(hold)
			select {
			case <-t.C:
			case <-c.ctx.Done():
			case <-c.s.draining: // shutting down: answer now
			}
			t.Stop()
		}
	}
	c.s.rewriteAddrs(p.resp, c.sec)
	switch {
	case p.err == nil:
		c.logRequest(p, kreq.GetVersion())
	case c.ctx.Err() != nil:
		// The connection died under the handler (client gone, Close).
		c.log.Debug("request abandoned", append(reqAttrs(p.key, kreq.GetVersion(), p.corr, p.clientID), "err", p.err)...)
	default:
		c.log.Warn("closing connection", append(reqAttrs(p.key, kreq.GetVersion(), p.corr, p.clientID), "err", p.err)...)
	}
}

// writeLoop writes responses in request order.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.s.removeConn(c)
	// After close (deferred below, so it runs first): the responses still
	// queued are dropped, and the segment regions they hold released once
	// their handlers are done (close cancels them).
	defer func() {
		for p := range c.queue {
			<-p.done
			releaseResponse(p.resp)
		}
	}()
	defer c.close()
	// Each response must be written within the write timeout: a client
	// that stops reading is closed, and what its responses hold (segment
	// regions, buffers) is released.
	var deadline time.Time
	drained := false
	defer func() {
		if !drained && !deadline.IsZero() && c.ctx.Err() == nil && !time.Now().Before(deadline) {
			c.log.Warn("closing connection: the client did not read its response within the write timeout", "timeout", c.s.cfg.ResponseWriteTimeout)
		}
	}()
	w := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	for p := range c.queue {
		select {
		case <-p.done:
		case <-c.ctx.Done():
			<-p.done
			releaseResponse(p.resp)
			return
		}
		deadline = time.Now().Add(c.s.cfg.ResponseWriteTimeout)
		c.nc.SetWriteDeadline(deadline)
		if fr, ok := p.resp.(*fetchResponse); ok {
			// Record sets from the segment files by sendfile.
			err := w.Flush()
			if err == nil && p.err == nil {
				c.s.metrics.countErrors(p.key, fr.FetchResponse)
				var n int64
				var fw *pieceWriter
				if fw, err = encodeFetchPieces(p.corr, fr.FetchResponse, fr.regions); err == nil {
					n, err = writeFetch(c.nc, fw)
				} else {
					c.log.Error("closing connection: fetch response", "err", err)
				}
				fw.free()
				if err == nil {
					c.s.metrics.written(p.key, p.start, int(n))
				}
			}
			fr.release()
			if err != nil || p.err != nil {
				return
			}
			continue
		}
		if sr, ok := p.resp.(*shareFetchResponse); ok {
			if !c.writeShareFetch(w, p, sr.ShareFetchResponse, sr.regions) {
				sr.release()
				return
			}
			sr.release()
			continue
		}
		if sr, ok := p.resp.(*kmsg.ShareFetchResponse); ok && p.err == nil && shareFetchEncodable(sr) {
			if !c.writeShareFetch(w, p, sr, nil) {
				return
			}
			continue
		}
		if p.err != nil {
			c.s.metrics.errorNamed(p.key, connClosedError)
			w.Flush()
			return
		}
		if p.resp == nil {
			c.s.metrics.written(p.key, p.start, 0)
			putBody(p.body) // the handler is done and nothing is sent
			if len(c.queue) == 0 && w.Flush() != nil {
				return
			}
			continue
		}
		if fr, ok := p.resp.(*kmsg.FetchResponse); ok && fetchEncodable(fr) {
			// Record sets go out by reference (writev), not copied.
			if w.Flush() != nil {
				return
			}
			c.s.metrics.countErrors(p.key, fr)
			fw, _ := encodeFetchPieces(p.corr, fr, nil) // no regions: no reads, no error
			bufs := fw.bufs
			n, err := bufs.WriteTo(c.nc)
			fw.free()
			if err != nil {
				return
			}
			c.s.metrics.written(p.key, p.start, int(n))
			continue
		}
		c.s.metrics.countErrors(p.key, p.resp)
		buf = appendResponse(buf[:0], p)
		// The response is encoded into buf: nothing refers to the
		// request any more.
		putBody(p.body)
		if _, err := w.Write(buf); err != nil {
			return
		}
		c.s.metrics.written(p.key, p.start, len(buf))
		if cap(buf) > 1<<20 {
			buf = nil // don't pin one huge fetch response's buffer
		}
		if len(c.queue) == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
	drained = true
	w.Flush()
}

// appendResponse frames p's response.
func appendResponse(dst []byte, p *pending) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.corr))
	if p.respFlexible {
		dst = append(dst, 0) // no header tags
	}
	dst = p.resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}
