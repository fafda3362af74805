package protocol

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

func apiVersionsReq(v int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	return req
}

func TestFrameTooLargeCloses(t *testing.T) {
	_, addr := startServer(t, Config{MaxRequestBytes: 1 << 10}, nil)
	rc := dialRaw(t, addr)
	rc.nc.Write(binary.BigEndian.AppendUint32(nil, 1<<10+1))
	rc.expectClosed()
}

func TestFrameNegativeCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	rc.nc.Write([]byte{0xff, 0xff, 0xff, 0xf0})
	rc.expectClosed()
}

// Responses already queued go out before the close.
func TestFrameTooLargeAfterPipelined(t *testing.T) {
	_, addr := startServer(t, Config{MaxRequestBytes: 1 << 10}, nil)
	rc := dialRaw(t, addr)
	req := apiVersionsReq(2)
	corr := rc.send(req)
	rc.nc.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
	rc.recv(req, corr)
	rc.expectClosed()
}

func TestUnknownKeyCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	// key 9999, version 0, correlation 1, null client ID
	rc.writeFrame([]byte{0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	rc.expectClosed()
}

// A key kmsg knows but we do not serve (DescribeDelegationToken) closes too.
func TestUnservedKeyCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrDescribeDelegationTokenRequest()
	req.Version = 2
	rc.send(req)
	rc.expectClosed()
}

func TestUnsupportedVersionCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 2 // message sets: not served
	rc.send(req)
	rc.expectClosed()
}

func TestShortHeaderCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	rc.writeFrame([]byte{0, 18, 0})
	rc.expectClosed()
}

func TestUnparsableBodyCloses(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	// ApiVersions v3 (flexible): header tags 0, then a truncated body.
	rc.writeFrame([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 0x40})
	rc.expectClosed()
}

// Many pipelined requests come back in request order.
func TestPipelinedInOrder(t *testing.T) {
	_, addr := startServer(t, Config{MaxInFlightPerConn: 8}, nil)
	rc := dialRaw(t, addr)
	const n = 200
	var reqs []kmsg.Request
	var buf []byte
	for i := range n {
		req := apiVersionsReq(int16(i % 5))
		reqs = append(reqs, req)
		buf = append(buf, rc.fmt.AppendRequest(nil, req, int32(i+1))...) // AppendRequest frames from dst[0]
	}
	go rc.nc.Write(buf)
	for i := range n {
		rc.recv(reqs[i], int32(i+1))
	}
}

func TestParseHeader(t *testing.T) {
	for _, frame := range [][]byte{
		nil,
		{0, 1},
		{0, 1, 0, 2, 0, 0, 0, 3, 0, 5, 'a'}, // client ID longer than the frame
	} {
		if _, _, err := parseHeader(frame); err == nil {
			t.Errorf("parseHeader(%v) accepted", frame)
		}
	}
	h, body, err := parseHeader([]byte{0, 1, 0, 2, 0, 0, 0, 3, 0, 1, 'a', 9})
	if err != nil || h.key != 1 || h.version != 2 || h.corr != 3 || *h.clientID != "a" || len(body) != 1 {
		t.Fatalf("parseHeader: %+v %v %v", h, body, err)
	}
	if _, err := skipTags([]byte{2, 0, 5, 1}); err == nil {
		t.Fatal("skipTags accepted a tag longer than its input")
	}
	if rest, err := skipTags([]byte{1, 0, 1, 7, 9}); err != nil || len(rest) != 1 {
		t.Fatalf("skipTags: %v %v", rest, err)
	}
}

// A Produce pipelined behind a long-polling Fetch on the same connection is
// not held up by it, and responses still come back in request order.
func TestProduceNotBehindLongPoll(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("lp2", 2)
	rc := dialRaw(t, c.addr)
	fetch := fetchReq(11, "lp2", 0, 0)
	fetch.MaxWaitMillis = 1500
	start := time.Now()
	fc := rc.send(fetch)
	prod := produceReq(9, -1, "lp2", 1, makeBatch(batchOpts{}, values(1, "x")...))
	pc := rc.send(prod)
	rc.recv(fetch, fc) // order: fetch first
	if sp := producePart(t, rc.recv(prod, pc)); sp.ErrorCode != 0 {
		t.Fatal(sp.ErrorCode)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v", el)
	}
	// The produce ran during the poll: it is committed well before the
	// fetch returned (checked through the partition's offsets).
	p, _ := c.b.Partition("lp2", 1)
	if p.Offsets().HighWatermark != 1 {
		t.Fatal("produce not applied")
	}
}

// Close with a long poll in flight returns promptly, and Serve returns nil.
func TestCloseWithLongPollInFlight(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("cl", 1)
	rc := dialRaw(t, c.addr)
	fetch := fetchReq(11, "cl", 0, 0)
	fetch.MaxWaitMillis = 60000
	rc.send(fetch)
	cl0, err := c.b.Partition("cl", 0)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { return cl0.Notified() > 0 }, "the long poll never parked on cl-0")
	start := time.Now()
	if err := c.s.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > closeGrace/2 {
		t.Fatalf("Close took %v", el)
	}
	// The long poll was answered before the connection closed.
	if sp := fetchPartResp(t, rc.recv(fetch, 1)); sp.ErrorCode != 0 {
		t.Fatal(sp.ErrorCode)
	}
	rc.expectClosed()
}

// The request byte budget: a second request waits until the first is
// answered when both together exceed MaxRequestBytes, one request always
// fits, and close wakes a waiter.
func TestRequestByteBudget(t *testing.T) {
	s := NewServer(Config{MaxRequestBytes: 100}, nil)
	a, b := net.Pipe()
	defer b.Close()
	c := newConn(s, a)
	if !c.acquire(100) {
		t.Fatal("first acquire refused")
	}
	got := make(chan bool)
	go func() { got <- c.acquire(1) }()
	select {
	case <-got:
		t.Fatal("acquire over budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	c.release(100)
	if !<-got {
		t.Fatal("acquire after release refused")
	}
	go func() { got <- c.acquire(100) }()
	select {
	case <-got:
		t.Fatal("acquire over budget did not wait")
	case <-time.After(20 * time.Millisecond): // waiting (or not started yet: close refuses it either way)
	}
	c.close()
	if <-got {
		t.Fatal("acquire after close succeeded")
	}
}

func TestMaxConnections(t *testing.T) {
	_, addr := startServer(t, Config{MaxConnections: 2}, nil)
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.roundTrip(apiVersionsReq(3))
	b.roundTrip(apiVersionsReq(3))
	c := dialRaw(t, addr)
	c.send(apiVersionsReq(3))
	c.expectClosed()
	a.nc.Close()
	// The slot frees once the server notices; bounded retry.
	testwait.For(t, time.Second, func() bool {
		d := dialRaw(t, addr)
		d.send(apiVersionsReq(3))
		_, err := d.readFrame()
		return err == nil
	}, "slot never freed")
}

func TestIdleConnectionClosed(t *testing.T) {
	_, addr := startServer(t, Config{ConnectionsMaxIdle: 200 * time.Millisecond}, nil)
	rc := dialRaw(t, addr)
	rc.roundTrip(apiVersionsReq(3))
	start := time.Now()
	rc.expectClosed()
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("idle close took %v", el)
	}
}
