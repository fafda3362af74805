package bench

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NullBroker answers ApiVersions, Metadata, CreateTopics, DeleteTopics,
// InitProducerID, ListOffsets, Produce and Fetch without storing records:
// a Produce advances a per-partition counter (the log end offset) and
// keeps references to the partition's latest batches (at most 64 or 4 MiB:
// the tail a live reader is in) and to its largest batch. A Fetch in the
// tail gets those batches; one further behind gets copies of the largest
// batch with the base offset rewritten (the CRC does not cover it), up to
// the tail, where the real batches take over (kgo skips the offsets it has
// already seen, so a reader sees every offset once). It measures what the
// load generator can do on this machine: a broker cannot look faster than
// the null broker through the same client.
//
// Concurrency: one goroutine per connection, requests of a connection
// answered in order; the topic table is under mu; Fetch long polls wait on
// wake, a channel closed and replaced by every Produce.
type NullBroker struct {
	ln     net.Listener
	host   string
	port   int32
	logger *slog.Logger

	mu     sync.Mutex
	topics map[string]*nullTopic
	nextID int64
	wake   chan struct{}
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

type nullTopic struct {
	id    [16]byte
	parts []nullPartition
}

type nullPartition struct {
	end       int64       // log end offset: records produced so far
	tail      []nullBatch // the latest batches, oldest first, contiguous up to end
	tailBytes int
	big       []byte // the largest batch received: served to readers behind the tail
}

// nullBatch is a batch as received (shared, never written) and the offset
// the null broker gave it.
type nullBatch struct {
	base int64
	b    []byte
}

// Bounds of a partition's tail (one batch is always kept).
const (
	nullTailBatches = 64
	nullTailBytes   = 4 << 20
)

// Limits of the null broker.
const (
	nullMaxFrame = 100 << 20 // the largest request frame
	nullMaxConns = 1024
	nullMaxWait  = 30 * time.Second
	nodeID       = 1
)

// nullVersions are the API versions the null broker answers: key, min, max.
var nullVersions = [][3]int16{
	{0, 3, 11}, // Produce (v3+: record batches only)
	{1, 4, 12}, // Fetch (topic names, not ids)
	{2, 1, 8},  // ListOffsets
	{3, 1, 12}, // Metadata
	{18, 0, 4}, // ApiVersions
	{19, 2, 7}, // CreateTopics
	{20, 1, 6}, // DeleteTopics
	{22, 0, 4}, // InitProducerID
}

// NewNullBroker listens on addr (host:port, port 0 = any free port).
func NewNullBroker(addr string, logger *slog.Logger) (*NullBroker, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: null broker: %v", ErrBroker, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	return &NullBroker{ln: ln, host: tcp.IP.String(), port: int32(tcp.Port), logger: logger,
		topics: map[string]*nullTopic{}, wake: make(chan struct{}), conns: map[net.Conn]bool{}}, nil
}

// Addr is the address clients connect to.
func (b *NullBroker) Addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

// Serve accepts connections until Close.
func (b *NullBroker) Serve() error {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("%w: accept: %v", ErrBroker, err)
		}
		b.mu.Lock()
		if b.closed || len(b.conns) >= nullMaxConns {
			b.mu.Unlock()
			b.logger.Warn("null broker: connection refused (closed or too many)")
			c.Close()
			continue
		}
		b.conns[c] = true
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serveConn(c)
	}
}

// Close stops accepting, closes every connection and waits for them.
func (b *NullBroker) Close() error {
	b.mu.Lock()
	b.closed = true
	err := b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *NullBroker) serveConn(c net.Conn) {
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
		b.wg.Done()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var bufs connBufs
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > nullMaxFrame {
			b.logger.Warn("null broker: bad frame size, closing", "size", n)
			return
		}
		// A fresh buffer per request: Produce keeps a reference to the
		// latest batch, which lives in this buffer.
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		resp, err := b.handle(frame, &bufs)
		if err != nil {
			b.logger.Warn("null broker: bad request, closing", "err", err)
			return
		}
		if resp == nil {
			continue // acks=0
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// handle parses one request frame (after the size) and returns the whole
// response frame, nil for none.
// connBufs are a connection's reusable buffers: a response is written
// before the next request is read, so its bytes can be reused; without
// this, zeroing fresh multi-MiB buffers was a third of the null broker's
// CPU. Each is at most about one Fetch response (55 MiB).
type connBufs struct {
	resp  []byte // the response frame
	arena []byte // record bytes of a Fetch response, carved per partition
	used  int
}

// take returns an empty slice with room for n bytes from the arena; an
// append past n reallocates (three-index slice) instead of running into
// the next partition's bytes.
func (cb *connBufs) take(n int) []byte {
	if cb.used+n > cap(cb.arena) {
		// Too small: a new arena for the rest of this response; the old
		// one stays alive through the slices already taken from it.
		size := 2 * cap(cb.arena)
		if size < cb.used+n {
			size = cb.used + n
		}
		cb.arena = make([]byte, size)
		cb.used = 0
	}
	out := cb.arena[cb.used : cb.used : cb.used+n]
	cb.used += n
	return out
}

func (b *NullBroker) handle(frame []byte, bufs *connBufs) ([]byte, error) {
	bufs.used = 0
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	// client id: nullable string (int16 length)
	if len(rest) < 2 {
		return nil, errors.New("short header")
	}
	cl := int(int16(binary.BigEndian.Uint16(rest)))
	rest = rest[2:]
	if cl > 0 {
		if cl > len(rest) {
			return nil, errors.New("short client id")
		}
		rest = rest[cl:]
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("unknown api key %d", key)
	}
	if !supported(key, version) && key != 18 {
		return nil, fmt.Errorf("api key %d version %d not offered", key, version)
	}
	if key == 18 && !supported(key, version) {
		// An ApiVersions newer than ours: answer v0 with the error and
		// our versions, as Kafka does, without reading the body, so the
		// client retries lower.
		r := &kmsg.ApiVersionsResponse{Version: 0, ErrorCode: kerr.UnsupportedVersion.Code}
		r.ApiKeys = apiKeys()
		return frameResponse(bufs, corr, false, r), nil
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, err
		}
	}
	var resp kmsg.Response
	if err := req.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("api key %d v%d: %w", key, version, err)
	}
	switch q := req.(type) {
	case *kmsg.ApiVersionsRequest:
		r := q.ResponseKind().(*kmsg.ApiVersionsResponse)
		r.ApiKeys = apiKeys()
		resp = r
	case *kmsg.MetadataRequest:
		resp = b.metadata(q)
	case *kmsg.CreateTopicsRequest:
		resp = b.createTopics(q)
	case *kmsg.DeleteTopicsRequest:
		resp = b.deleteTopics(q)
	case *kmsg.InitProducerIDRequest:
		r := q.ResponseKind().(*kmsg.InitProducerIDResponse)
		b.mu.Lock()
		b.nextID++
		r.ProducerID = b.nextID
		b.mu.Unlock()
		resp = r
	case *kmsg.ListOffsetsRequest:
		resp = b.listOffsets(q)
	case *kmsg.ProduceRequest:
		r := b.produce(q)
		if q.Acks == 0 {
			return nil, nil
		}
		resp = r
	case *kmsg.FetchRequest:
		resp = b.fetch(q, bufs)
	default:
		return nil, fmt.Errorf("api key %d not served", key)
	}
	// Response header v1 (a tag buffer) for flexible requests, except
	// ApiVersions whose response header is always v0.
	return frameResponse(bufs, corr, req.IsFlexible() && key != 18, resp), nil
}

// responseSize guesses a response's encoded size from the record bytes it
// carries, so that encoding it copies them once instead of growing the
// buffer step by step (measured: growing cost more than the copy itself).
func responseSize(resp kmsg.Response) int {
	n := 1024
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		for _, t := range f.Topics {
			n += 64 + len(t.Topic)
			for _, p := range t.Partitions {
				n += 128 + len(p.RecordBatches)
			}
		}
	}
	return n
}

func supported(key, version int16) bool {
	for _, v := range nullVersions {
		if v[0] == key {
			return version >= v[1] && version <= v[2]
		}
	}
	return false
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(nullVersions))
	for _, v := range nullVersions {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: v[0], MinVersion: v[1], MaxVersion: v[2]})
	}
	return keys
}

// skipTags skips a tagged-field section (KIP-482): a count, then per field
// a tag and a length-prefixed value.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > 1000 {
		return nil, errors.New("bad tag count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		_, k = binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errors.New("bad tag length")
		}
		b = b[k+int(l):]
	}
	return b, nil
}

func frameResponse(bufs *connBufs, corr int32, flexible bool, resp kmsg.Response) []byte {
	if n := responseSize(resp); cap(bufs.resp) < n {
		bufs.resp = make([]byte, 0, n)
	}
	buf := bufs.resp[:8]
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	if flexible {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if cap(buf) <= nullMaxFrame {
		bufs.resp = buf[:0] // keep a grown buffer for the next response
	}
	return buf
}

func (b *NullBroker) metadata(q *kmsg.MetadataRequest) kmsg.Response {
	r := q.ResponseKind().(*kmsg.MetadataResponse)
	r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: nodeID, Host: b.host, Port: b.port}}
	cluster := "null-broker"
	r.ClusterID = &cluster
	r.ControllerID = nodeID
	b.mu.Lock()
	defer b.mu.Unlock()
	add := func(name string, t *nullTopic) {
		rt := kmsg.NewMetadataResponseTopic()
		n := name
		rt.Topic = &n
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			r.Topics = append(r.Topics, rt)
			return
		}
		rt.TopicID = t.id
		for i := range t.parts {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition = int32(i)
			p.Leader = nodeID
			p.Replicas = []int32{nodeID}
			p.ISR = []int32{nodeID}
			rt.Partitions = append(rt.Partitions, p)
		}
		r.Topics = append(r.Topics, rt)
	}
	if q.Topics == nil {
		for name, t := range b.topics {
			add(name, t)
		}
		return r
	}
	for _, t := range q.Topics {
		if t.Topic != nil {
			add(*t.Topic, b.topics[*t.Topic])
		}
	}
	return r
}

func (b *NullBroker) createTopics(q *kmsg.CreateTopicsRequest) kmsg.Response {
	r := q.ResponseKind().(*kmsg.CreateTopicsResponse)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range q.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := t.NumPartitions
		if n == -1 {
			n = 1
		}
		switch {
		case b.topics[t.Topic] != nil:
			rt.ErrorCode = kerr.TopicAlreadyExists.Code
		case n < 1 || n > maxPartitions || t.Topic == "":
			rt.ErrorCode = kerr.InvalidPartitions.Code
		default:
			nt := &nullTopic{parts: make([]nullPartition, n)}
			rand.Read(nt.id[:])
			if !q.ValidateOnly {
				b.topics[t.Topic] = nt
			}
			rt.TopicID = nt.id
			rt.NumPartitions = n
			rt.ReplicationFactor = 1
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (b *NullBroker) deleteTopics(q *kmsg.DeleteTopicsRequest) kmsg.Response {
	r := q.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := append([]string(nil), q.TopicNames...)
	for _, t := range q.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		rt.Topic = &n
		if b.topics[name] == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		delete(b.topics, name)
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (b *NullBroker) listOffsets(q *kmsg.ListOffsetsRequest) kmsg.Response {
	r := q.ResponseKind().(*kmsg.ListOffsetsResponse)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range q.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		nt := b.topics[t.Topic]
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp = -1
			switch {
			case nt == nil || p.Partition < 0 || int(p.Partition) >= len(nt.parts):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.Timestamp == -1: // latest
				rp.Offset = nt.parts[p.Partition].end
			default: // earliest, or any time: everything starts at 0
				rp.Offset = 0
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// Offsets in a v2 record batch header.
const (
	batchLenAt       = 8  // int32: bytes after this field
	batchDeltaAt     = 23 // int32: last offset delta
	batchHeaderBytes = 61
)

func (b *NullBroker) produce(q *kmsg.ProduceRequest) kmsg.Response {
	r := q.ResponseKind().(*kmsg.ProduceResponse)
	b.mu.Lock()
	defer b.mu.Unlock()
	woke := false
	for _, t := range q.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		nt := b.topics[t.Topic]
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LogAppendTime = -1
			if nt == nil || p.Partition < 0 || int(p.Partition) >= len(nt.parts) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			np := &nt.parts[p.Partition]
			rp.BaseOffset = np.end
			recs := p.Records
			for len(recs) >= batchHeaderBytes {
				l := int(int32(binary.BigEndian.Uint32(recs[batchLenAt:])))
				delta := int32(binary.BigEndian.Uint32(recs[batchDeltaAt:]))
				if l < batchHeaderBytes-12 || 12+l > len(recs) || delta < 0 {
					rp.ErrorCode = kerr.CorruptMessage.Code
					break
				}
				batch := recs[:12+l]
				if len(batch) > len(np.big) {
					np.big = batch
				}
				np.tail = append(np.tail, nullBatch{base: np.end, b: batch})
				np.tailBytes += len(batch)
				for len(np.tail) > 1 && (len(np.tail) > nullTailBatches || np.tailBytes > nullTailBytes) {
					np.tailBytes -= len(np.tail[0].b)
					np.tail[0] = nullBatch{}
					np.tail = np.tail[1:]
				}
				np.end += int64(delta) + 1
				recs = recs[12+l:]
				woke = true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	if woke {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	return r
}

func (b *NullBroker) fetch(q *kmsg.FetchRequest, bufs *connBufs) kmsg.Response {
	wait := time.Duration(q.MaxWaitMillis) * time.Millisecond
	if wait > nullMaxWait {
		wait = nullMaxWait
	}
	deadline := time.Now().Add(wait)
	for {
		bufs.used = 0
		r, got, wake := b.fetchOnce(q, bufs)
		left := time.Until(deadline)
		if got || left <= 0 {
			return r
		}
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// fetchOnce answers every partition from its tail and largest batch; got
// says whether any records were returned, wake is closed by the next
// Produce. The partition table is read under mu (the tail copied: a
// Produce changes it), the record bytes copied outside it.
func (b *NullBroker) fetchOnce(q *kmsg.FetchRequest, bufs *connBufs) (resp *kmsg.FetchResponse, got bool, wake <-chan struct{}) {
	type snap struct {
		known bool
		end   int64
		tail  []nullBatch
		big   []byte
	}
	var snaps []snap
	b.mu.Lock()
	wake = b.wake
	for _, t := range q.Topics {
		nt := b.topics[t.Topic]
		for _, p := range t.Partitions {
			if nt == nil || p.Partition < 0 || int(p.Partition) >= len(nt.parts) {
				snaps = append(snaps, snap{})
				continue
			}
			np := nt.parts[p.Partition]
			snaps = append(snaps, snap{known: true, end: np.end, tail: append([]nullBatch(nil), np.tail...), big: np.big})
		}
	}
	b.mu.Unlock()

	r := q.ResponseKind().(*kmsg.FetchResponse)
	budget := int64(q.MaxBytes)
	if budget <= 0 || budget > 55<<20 {
		budget = 55 << 20
	}
	i := 0
	for _, t := range q.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			sn := snaps[i]
			i++
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			if !sn.known {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = sn.end, sn.end, 0
			// A copy of the largest batch may carry a reader past the end
			// when the tail is shorter than that batch: such a reader
			// just waits, as at the end, instead of being told
			// OFFSET_OUT_OF_RANGE and sent back to the start.
			if p.FetchOffset < 0 {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if p.FetchOffset < sn.end && len(sn.tail) > 0 && budget > 0 {
				limit := int64(p.PartitionMaxBytes)
				if limit <= 0 || limit > budget {
					limit = budget
				}
				hint := limit
				if n := (sn.end-p.FetchOffset)/batchSpan(sn.big) + 1; n*int64(len(sn.big)) < hint {
					hint = n * int64(len(sn.big))
				}
				out := bufs.take(int(hint) + len(sn.big))
				for off := p.FetchOffset; off < sn.end; {
					// Behind the tail: a copy of the largest batch placed
					// at off. In the tail: the batch holding off, as
					// received (its timestamps are what e2e measures).
					tmpl, base := sn.big, off
					if tb := sn.tail[0]; off >= tb.base {
						k := 0
						for k < len(sn.tail)-1 && sn.tail[k+1].base <= off {
							k++
						}
						tmpl, base = sn.tail[k].b, sn.tail[k].base
					}
					if len(out) > 0 && int64(len(out)+len(tmpl)) > limit {
						break
					}
					at := len(out)
					out = append(out, tmpl...)
					binary.BigEndian.PutUint64(out[at:], uint64(base))
					binary.BigEndian.PutUint32(out[at+12:], 0) // partition leader epoch
					off = base + batchSpan(tmpl)
				}
				rp.RecordBatches = out
				budget -= int64(len(out))
				got = true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, got, wake
}

// batchSpan is the number of offsets a batch covers.
func batchSpan(batch []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(batch[batchDeltaAt:]))) + 1
}
