package protocol

import (
	"bufio"
	"io"
	"math/bits"
	"net"
	"sync"
)

// Produce request bodies are read into pooled buffers (not zeroed, unlike
// make), one size class per power of two, because allocating and zeroing
// a fresh buffer per body was ~14% of the broker's produce CPU, plus ~5%
// for growth copies of bodies over 1 MiB.
//
// Only Produce bodies are pooled: their records are written to the
// segment by Broker.Produce before it returns, and nothing in the
// response points into the request, so the buffer goes back to the pool
// once the response is written (writeLoop) or skipped (acks=0). Other
// requests' bodies may be kept by their handlers (group metadata,
// assignments) or by responses until written, so they stay plain
// allocations. PRECONDITION: Broker.Produce must not keep a reference to
// records after it returns; a path that hands the batch to something that
// outlives the call (a Raft log cache, an in-flight replication send) must
// copy it first, or this pooling must be turned off (Config.NoBodyPool).
const (
	minPoolClass = 10 // 1 KiB: smaller bodies are cheap to allocate
	maxPoolClass = 24 // 16 MiB: larger bodies are allocated exactly, not kept
)

// bodyPools[c] holds *[]byte of capacity exactly 1<<c.
var bodyPools [maxPoolClass + 1]sync.Pool

// poolClass returns the class for an n-byte body, or -1 when n is not
// pooled.
func poolClass(n int) int {
	if n <= 0 {
		return -1
	}
	c := bits.Len(uint(n - 1)) // smallest c with 1<<c >= n
	if c < minPoolClass {
		c = minPoolClass
	}
	if c > maxPoolClass {
		return -1
	}
	return c
}

// getBody returns a buffer of length n whose contents are garbage, and
// the handle to give back to putBody (nil when n is not pooled).
func getBody(n int) ([]byte, *[]byte) {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n), nil
	}
	if v, _ := bodyPools[c].Get().(*[]byte); v != nil {
		return (*v)[:n], v
	}
	b := make([]byte, 1<<c)
	return b[:n], &b
}

// putBody returns a buffer from getBody to its pool. The caller must hold
// no reference into it any more.
func putBody(h *[]byte) {
	if h == nil {
		return
	}
	c := poolClass(cap(*h))
	if c < 0 || cap(*h) != 1<<c {
		return
	}
	*h = (*h)[:cap(*h)]
	bodyPools[c].Put(h)
}

// readPooledBody reads an n-byte body into a pooled buffer. Up to
// exactAllocBytes it is read into its final buffer at once. A larger body
// grows from the bytes received, not from the length announced: it starts
// in a pooled buffer of exactAllocBytes, and each time that fills up it
// moves to one twice as large (at most n), so a client that announces a
// large frame and stalls pins at most exactAllocBytes, and one that sends
// it whole costs copies adding up to less than n (pooled buffers are not
// zeroed). charge (nil: none) is called with each growth before it is
// made; false stops the read.
func readPooledBody(r *bufio.Reader, n int, charge func(int) bool) ([]byte, *[]byte, error) {
	if charge == nil {
		charge = func(int) bool { return true }
	}
	size := min(n, exactAllocBytes)
	if !charge(size) {
		return nil, nil, net.ErrClosed
	}
	buf, h := getBody(size)
	got := 0
	for {
		k, err := io.ReadFull(r, buf[got:size])
		got += k
		if err != nil {
			putBody(h)
			return nil, nil, unexpected(err)
		}
		if size == n {
			return buf, h, nil
		}
		next := min(2*size, n)
		if !charge(next - size) {
			putBody(h)
			return nil, nil, net.ErrClosed
		}
		nbuf, nh := getBody(next)
		copy(nbuf, buf[:got])
		putBody(h)
		buf, h, size = nbuf, nh, next
	}
}
