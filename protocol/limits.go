package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Limits of the Kafka listener (issue 19, item 6), each with a setting:
//
//	max.connections                    open client connections (Config.MaxConnections)
//	max.connections.per.ip             open connections from one IP address
//	connections.max.idle.ms            no request for this long closes a connection
//	queued.max.request.bytes           request bytes held in memory by all connections
//	strata.request.read.timeout.ms     a request must arrive whole within this once its first byte has
//	strata.response.write.timeout.ms   a response must be written within this (a client that stops reading is closed)
//	strata.produce.max.partitions      topic-partitions one Produce may name
//
// Memory grows from bytes received, not from a length a client claims: a
// frame's buffer grows as its bytes arrive (readBody, readPooledBody), and
// queued.max.request.bytes is charged as it grows, so a client that
// announces 100 MiB and sends nothing holds at most exactAllocBytes.

// Defaults of the limits above (Config's zero values).
const (
	DefaultQueuedMaxRequestBytes = 256 << 20
	DefaultRequestReadTimeout    = 30 * time.Second
	DefaultResponseWriteTimeout  = 60 * time.Second
	DefaultProduceMaxPartitions  = 100000
)

// ErrTooManyElements is a request naming more elements (topic-partitions)
// than its limit: the connection is closed before the request is decoded.
var ErrTooManyElements = errors.New("protocol: request names too many elements")

// memBudget bounds the request bytes held by every connection together
// (queued.max.request.bytes). A reader that would exceed it waits, as
// Kafka stops reading from its sockets; one request may always be held
// when nothing else is, so a frame larger than the budget still passes.
type memBudget struct {
	max int64 // <= 0: unbounded

	mu      sync.Mutex
	held    int64         // protected by mu
	waiters int           // protected by mu
	freed   chan struct{} // protected by mu; closed (and replaced) when bytes are released to waiters
}

func newMemBudget(max int64) *memBudget {
	return &memBudget{max: max, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting while they would exceed the budget; it
// returns false when done closes first.
func (b *memBudget) acquire(n int64, done <-chan struct{}) bool {
	if b.max <= 0 || n <= 0 {
		return true
	}
	for {
		b.mu.Lock()
		if b.held == 0 || b.held+n <= b.max {
			b.held += n
			b.mu.Unlock()
			return true
		}
		b.waiters++
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ch:
			b.mu.Lock()
			b.waiters--
			b.mu.Unlock()
		case <-done:
			b.mu.Lock()
			b.waiters--
			b.mu.Unlock()
			return false
		}
	}
}

// release returns n bytes.
func (b *memBudget) release(n int64) {
	if b.max <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// inUse is the bytes held now (metrics, tests).
func (b *memBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// checkProduceCounts walks a Produce body's topic and partition arrays
// without allocating and refuses one naming more than max topic-partitions
// in all (a topic without partitions counts as one). kmsg would allocate
// a struct of about 100 bytes per element from a count the frame merely
// makes plausible: the 8.4 MB Produce of 2.8 million empty topics grew
// the broker by 400 MB. A body the walk cannot follow is left to kmsg's
// decoder, which refuses it.
func checkProduceCounts(body []byte, version int16, max int) error {
	if max <= 0 {
		return nil
	}
	flexible := version >= 9
	r := scanner{b: body, flexible: flexible, ok: true}
	if version >= 3 {
		r.nullableString()
	}
	r.skip(2 + 4) // acks, timeout
	topics := r.arrayLen()
	total := 0
	for i := 0; i < topics && r.ok; i++ {
		if version >= 13 {
			r.skip(16)
		} else {
			r.nullableString()
		}
		parts := r.arrayLen()
		total += max1(parts)
		if total > max {
			return fmt.Errorf("%w: Produce names more than %d topic-partitions", ErrTooManyElements, max)
		}
		for j := 0; j < parts && r.ok; j++ {
			r.skip(4)
			r.nullableBytes()
			r.tags()
		}
		r.tags()
	}
	if topics > max {
		return fmt.Errorf("%w: Produce names %d topics (at most %d)", ErrTooManyElements, topics, max)
	}
	return nil
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// scanner reads the shapes of Kafka's encoding without keeping anything;
// ok turns false at the first read past the end (and stays false).
type scanner struct {
	b        []byte
	flexible bool
	ok       bool
}

func (s *scanner) fail() { s.ok, s.b = false, nil }

func (s *scanner) skip(n int) {
	if !s.ok || n < 0 || n > len(s.b) {
		s.fail()
		return
	}
	s.b = s.b[n:]
}

func (s *scanner) uvarint() uint64 {
	if !s.ok {
		return 0
	}
	v, n := binary.Uvarint(s.b)
	if n <= 0 {
		s.fail()
		return 0
	}
	s.b = s.b[n:]
	return v
}

// length reads a compact (uvarint n+1) or classic (int16/int32) length;
// -1 is null or unreadable.
func (s *scanner) length(classicBytes int) int {
	if !s.ok {
		return -1
	}
	if s.flexible {
		v := s.uvarint()
		if !s.ok || v > uint64(len(s.b))+1 {
			s.fail()
			return -1
		}
		return int(v) - 1
	}
	if len(s.b) < classicBytes {
		s.fail()
		return -1
	}
	var n int
	if classicBytes == 2 {
		n = int(int16(binary.BigEndian.Uint16(s.b)))
	} else {
		n = int(int32(binary.BigEndian.Uint32(s.b)))
	}
	s.b = s.b[classicBytes:]
	return n
}

func (s *scanner) nullableString() {
	if n := s.length(2); n > 0 {
		s.skip(n)
	}
}

func (s *scanner) nullableBytes() {
	if n := s.length(4); n > 0 {
		s.skip(n)
	}
}

// arrayLen is an array's count, 0 when null or unreadable.
func (s *scanner) arrayLen() int {
	return max(s.length(4), 0)
}

func (s *scanner) tags() {
	if !s.flexible {
		return
	}
	n := s.uvarint()
	for i := uint64(0); i < n && s.ok; i++ {
		s.uvarint()
		size := s.uvarint()
		if size > uint64(len(s.b)) {
			s.fail()
			return
		}
		s.skip(int(size))
	}
}
