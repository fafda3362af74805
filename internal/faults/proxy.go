package faults

import (
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The harness's own TCP proxy: every byte between brokers, and between
// the harness's clients and brokers, goes through it, in the host's
// namespace. Broker i advertises proxyIP(i) (an address of the bridge)
// for its Kafka listener and its Raft entry in controller.quorum.voters,
// and binds nodeIP(i) inside its namespace; the proxy on proxyIP(i)
// forwards to nodeIP(i). It knows which broker a connection comes from
// by its source address (nodeIP(k); the bridge's own address is the
// harness's clients), so it can
//
//   - delay what goes to or from a broker (the slow fault: every chunk
//     late by a latency drawn for the fault, with jitter, order kept);
//   - lose packets as TCP shows it (the lossy fault: a chunk now and
//     then late by a retransmission timeout, 200-800 ms, and rarely a
//     connection reset);
//   - hold what one broker sends to another while the pair is cut (the
//     blackhole routes do the same at the IP level; the proxy's hold
//     covers the legs the routes cannot see, host to broker).
//
// tc netem would do the first two in the kernel; these machines' kernels
// lack it.

// proxyIP is broker id's proxied address (on the bridge).
func proxyIP(id int) string { return fmt.Sprintf("%s.%d", subnet, 20+id) }

// netFault is the proxy's impairment of one broker's traffic.
type netFault struct {
	latency time.Duration // slow: added to every chunk (jitter +-25%)
	loss    float64       // lossy: chance a chunk waits a retransmission timeout
	reset   float64       // lossy: chance a chunk resets its connection
}

// proxy is the listeners and connections of a run's proxies.
type proxy struct {
	nw    *netns
	lns   []net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{} // protected by mu
	rng   *rand.Rand            // protected by mu
	fault map[int]netFault      // by broker; protected by mu
	wg    sync.WaitGroup
}

// startProxy listens on proxyIP(id):port for every broker and port.
func startProxy(nw *netns, n int, ports []int, seed int64) (*proxy, error) {
	p := &proxy{nw: nw, conns: map[net.Conn]struct{}{}, rng: rand.New(rand.NewSource(seed)), fault: map[int]netFault{}}
	for id := 1; id <= n; id++ {
		for _, port := range ports {
			ln, err := net.Listen("tcp", net.JoinHostPort(proxyIP(id), strconv.Itoa(port)))
			if err != nil {
				p.close()
				return nil, err
			}
			p.lns = append(p.lns, ln)
			p.wg.Add(1)
			go p.accept(ln, id, net.JoinHostPort(nodeIP(id), strconv.Itoa(port)))
		}
	}
	return p, nil
}

// set impairs broker id's traffic (the zero netFault: none).
func (p *proxy) set(id int, f netFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f == (netFault{}) {
		delete(p.fault, id)
	} else {
		p.fault[id] = f
	}
}

// clear ends every impairment.
func (p *proxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.fault)
}

func (p *proxy) close() {
	for _, ln := range p.lns {
		ln.Close()
	}
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// source is the broker a connection comes from (0: the harness).
func source(addr net.Addr) int {
	host, _, _ := net.SplitHostPort(addr.String())
	if rest, ok := strings.CutPrefix(host, subnet+"."); ok {
		if v, err := strconv.Atoi(rest); err == nil && v > 10 && v < 20 {
			return v - 10
		}
	}
	return 0
}

func (p *proxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !on {
		delete(p.conns, c)
		return true
	}
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) accept(ln net.Listener, id int, target string) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c, source(c.RemoteAddr()), id, target)
		}()
	}
}

// serve forwards one connection from broker src (0: a client) to
// broker dst at target.
func (p *proxy) serve(c net.Conn, src, dst int, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		// The broker is down or cut off: reset the client's connection,
		// the nearest a proxy comes to the refusal or timeout it would
		// have seen (a clean close during the handshake reads to some
		// clients as a broker refusing them, which they do not retry).
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		return
	}
	defer up.Close()
	if !p.track(c, true) || !p.track(up, true) {
		return
	}
	defer p.track(c, false)
	defer p.track(up, false)
	done := make(chan struct{}, 2)
	go func() { p.pump(c, up, src, dst); done <- struct{}{} }()
	go func() { p.pump(up, c, dst, src); done <- struct{}{} }()
	<-done // either side gone: both go
	c.Close()
	up.Close()
	<-done
}

type chunk struct {
	b  []byte
	at time.Time // deliver then
}

// pump copies what from (broker a, 0: a client) sends to to (broker b),
// each chunk delayed and held as the faults say.
func (p *proxy) pump(from, to net.Conn, a, b int) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := from.Read(buf)
			if n > 0 {
				d, reset := p.delay(a, b)
				if reset {
					from.Close()
					to.Close()
					return
				}
				at := time.Now().Add(d)
				if at.Before(last) {
					at = last // order kept
				}
				last = at
				q <- chunk{buf[:n], at}
			}
			if err != nil {
				return
			}
		}
	}()
	var werr error
	for ch := range q {
		if werr != nil {
			continue // drain
		}
		if d := time.Until(ch.at); d > 0 {
			time.Sleep(d)
		}
		for a > 0 && b > 0 && p.nw.isCut(a, b) {
			time.Sleep(10 * time.Millisecond) // held, as a blackhole holds it
		}
		if _, werr = to.Write(ch.b); werr != nil {
			from.Close()
		}
	}
	if tc, ok := to.(*net.TCPConn); ok && werr == nil {
		tc.CloseWrite()
	}
}

// delay draws one chunk's delay from a to b, and whether it resets.
func (p *proxy) delay(a, b int) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	for _, id := range []int{a, b} {
		f, ok := p.fault[id]
		if !ok || id == 0 {
			continue
		}
		if f.latency > 0 {
			d += f.latency*3/4 + time.Duration(p.rng.Int63n(int64(f.latency/2)+1))
		}
		if f.loss > 0 && p.rng.Float64() < f.loss {
			d += 200*time.Millisecond + time.Duration(p.rng.Int63n(int64(600*time.Millisecond)))
		}
		if f.reset > 0 && p.rng.Float64() < f.reset {
			return 0, true
		}
	}
	return d, false
}
