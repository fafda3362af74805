package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/segment"
)

// The chaos harness: a cluster of real `strata serve` processes on
// 127.0.0.1 whose replication traffic all passes through loopback proxies
// the test controls (cutNet), so a broker can be SIGKILLed and restarted
// on the same data directory and ports, or cut off from the others.
//
//	broker i ──dial voter j (proxy j)──> proxy j ──> broker j's replication listener
//
// Every broker is given the same controller.quorum.voters, naming the
// proxies; each binds its real replication listener elsewhere
// (replication.listener). A proxy learns which broker dialed it from the
// kernel (the dialing socket's inode in /proc/net/tcp, found among the
// brokers' open files), so cutting broker k refuses and closes both the
// connections into k and the ones k opened to the others: a full
// partition of k from its peers, while clients still reach k's Kafka
// listener.

// chaosNode is one strata process of a chaos cluster.
type chaosNode struct {
	t     testing.TB
	id    int32
	kafka string // Kafka listener (fixed across restarts)
	rep   string // real replication listener, behind the proxy
	voter string // the proxy: what the voters list names
	dir   string
	args  []string
	log   string // stdout+stderr of every run, appended
	// tls, when set, is how the readiness check reaches a Kafka listener
	// that speaks TLS (startChaosClusterTLS).
	tls *tls.Config

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil when not running; protected by mu
	done chan struct{} // closed when cmd has exited; protected by mu
}

func (n *chaosNode) start() {
	n.t.Helper()
	lf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	fmt.Fprintf(lf, "==== test: start at %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(strataBin, n.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// serve reads STRATA_* variables as settings: the test's own are not
	// for it.
	cmd.Env = brokerEnv()
	if err := cmd.Start(); err != nil {
		lf.Close()
		n.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// running reports whether the process is up (started, not yet exited).
func (n *chaosNode) running() bool {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (n *chaosNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *chaosNode) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// waitReady polls until the node answers ApiVersions (serve answers only
// once its broker has joined the metadata quorum).
func (n *chaosNode) waitReady(timeout time.Duration) {
	n.t.Helper()
	testwait.For(n.t, timeout, func() bool {
		if !n.running() {
			n.t.Fatalf("broker %d exited during start-up; see %s", n.id, n.log)
		}
		if n.tls != nil {
			return kafkaAnswersV0TLS(n.kafka, n.tls)
		}
		return kafkaAnswersV0(n.kafka)
	}, "broker %d not ready within %v; see %s", n.id, timeout, n.log)
}

// kafkaAnswersV0 reports whether addr answers an ApiVersions v0 request.
func kafkaAnswersV0(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	return answersV0(c)
}

// kafkaAnswersV0TLS is kafkaAnswersV0 over TLS (ApiVersions is served
// before SASL authentication).
func kafkaAnswersV0TLS(addr string, cfg *tls.Config) bool {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		return false
	}
	return answersV0(c)
}

func answersV0(c net.Conn) bool {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		return false
	}
	var hdr [8]byte
	_, err := io.ReadFull(c, hdr[:])
	return err == nil && hdr[7] == 1
}

// chaosCluster is n brokers behind a cutNet.
type chaosCluster struct {
	t     *testing.T
	nodes []*chaosNode
	net   *cutNet

	mu      sync.Mutex
	directs map[int32]*kgo.Client // protected by mu
}

// startChaosCluster starts n brokers (all voters) with partition groups'
// heartbeat timeout hb and waits until every one answers.
func startChaosCluster(t *testing.T, n int, hb time.Duration, extra ...string) *chaosCluster {
	t.Helper()
	return startChaosClusterTLS(t, n, hb, nil, extra...)
}

// startChaosClusterTLS is startChaosCluster for brokers whose Kafka
// listener speaks TLS: readyTLS reaches it for the readiness check.
func startChaosClusterTLS(t *testing.T, n int, hb time.Duration, readyTLS *tls.Config, extra ...string) *chaosCluster {
	t.Helper()
	offs := make([]int, 0, 2*n)
	for i := 0; i < n; i++ {
		offs = append(offs, i, 100+i)
	}
	base := freePortRun(t, offs...)
	c := &chaosCluster{t: t}
	c.net = &cutNet{t: t, cut: map[int32]bool{}, links: map[*link]struct{}{}, nodes: func() []*chaosNode { return c.nodes }}
	dir := t.TempDir()
	if keep := os.Getenv("STRATA_CHAOS_DIR"); keep != "" {
		// Kept after the test, for reading the brokers' logs and data.
		var err error
		if dir, err = os.MkdirTemp(keep, t.Name()+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("brokers' data and logs in %s", dir)
	}
	var voters []string
	for i := 1; i <= n; i++ {
		node := &chaosNode{t: t, id: int32(i),
			kafka: fmt.Sprintf("127.0.0.1:%d", base+i-1),
			rep:   fmt.Sprintf("127.0.0.1:%d", base+100+i-1),
			dir:   filepath.Join(dir, fmt.Sprintf("broker-%d", i)),
			log:   filepath.Join(dir, fmt.Sprintf("broker-%d.log", i)),
			tls:   readyTLS,
		}
		node.voter = c.net.listen(node)
		voters = append(voters, fmt.Sprintf("%d@%s", i, node.voter))
		c.nodes = append(c.nodes, node)
	}
	for _, node := range c.nodes {
		// "{node.id}" in a setting stands for the node's ID (a keystore
		// per node: replication_tls_test.go).
		own := make([]string, len(extra))
		for i, a := range extra {
			own[i] = strings.ReplaceAll(a, "{node.id}", strconv.Itoa(int(node.id)))
		}
		node.args = append([]string{"serve",
			"--set", fmt.Sprintf("node.id=%d", node.id),
			"--set", "listeners=PLAINTEXT://" + node.kafka,
			"--set", "log.dirs=" + node.dir,
			"--set", "controller.quorum.voters=" + strings.Join(voters, ","),
			"--set", "replication.listener=" + node.rep,
			"--set", fmt.Sprintf("strata.partition.heartbeat.timeout.ms=%d", hb.Milliseconds()),
		}, own...)
	}
	t.Cleanup(func() {
		for _, node := range c.nodes {
			node.kill()
		}
		c.net.close()
		if t.Failed() {
			for _, node := range c.nodes {
				t.Logf("broker %d log (tail):\n%s", node.id, fileTail(node.log, 12000))
			}
		}
	})
	for _, node := range c.nodes {
		node.start()
	}
	for _, node := range c.nodes {
		node.waitReady(60 * time.Second)
	}
	return c
}

func (c *chaosCluster) node(id int32) *chaosNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (c *chaosCluster) bootstrap() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.kafka)
	}
	return out
}

// client returns a kgo client seeded with every broker, retrying fast
// (the defaults back off up to 2.5 s, which would hide failover time).
func (c *chaosCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(time.Second),
	}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// partitionLeaders returns each partition's (leader, epoch): every
// running broker that is not cut off is asked, and the answer with the
// highest leader epoch wins (a broker that was cut off or restarted may
// answer from a metadata image that is behind for a moment).
func (c *chaosCluster) partitionLeaders(ctx context.Context, _ *kadm.Client, topic string) (map[int32][2]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out := map[int32][2]int32{}
	var errs []string
	for _, n := range c.nodes {
		if !n.running() || c.net.isCut(n.id) {
			continue
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		// The seed broker: this node, whatever the client has learnt.
		kresp, err := c.direct(n).SeedBrokers()[0].Request(ctx, req)
		resp, _ := kresp.(*kmsg.MetadataResponse)
		if err == nil && resp == nil {
			err = fmt.Errorf("unexpected response %T", kresp)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("broker %d: %v", n.id, err))
			continue
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 {
				errs = append(errs, fmt.Sprintf("broker %d: topic error %d", n.id, t.ErrorCode))
				continue
			}
			for _, p := range t.Partitions {
				if cur, ok := out[p.Partition]; !ok || p.LeaderEpoch > cur[1] {
					out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metadata for %s: %v", topic, errs)
	}
	return out, nil
}

// direct returns a client that talks to node n only (cached; closed with
// the test).
func (c *chaosCluster) direct(n *chaosNode) *kgo.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.directs[n.id]; cl != nil {
		return cl
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka), kgo.DialTimeout(time.Second), kgo.RequestRetries(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.directs == nil {
		c.directs = map[int32]*kgo.Client{}
	}
	c.directs[n.id] = cl
	c.t.Cleanup(cl.Close)
	return cl
}

// waitLeaders waits until every partition of topic has a leader that is
// running and not cut.
func (c *chaosCluster) waitLeaders(ctx context.Context, adm *kadm.Client, topic string, parts int32, timeout time.Duration) map[int32][2]int32 {
	c.t.Helper()
	var last string
	var ls map[int32][2]int32
	if !testwait.Until(timeout, func() bool {
		var err error
		ls, err = c.partitionLeaders(ctx, adm, topic)
		ok := err == nil && int32(len(ls)) == parts
		for _, le := range ls {
			n := c.node(le[0])
			if n == nil || !n.running() || c.net.isCut(n.id) {
				ok = false
			}
		}
		last = fmt.Sprintf("%v %v", ls, err)
		return ok
	}) {
		c.t.Fatalf("%s: partitions without a live leader after %v: %s", topic, timeout, last)
	}
	return ls
}

// replicaBatches reads the record batches of topic-partition from node's
// data directory: every *.log segment in base-offset order, each batch
// whole (a torn tail, being written, is left out).
func replicaBatches(dir, topic string, p int32) ([][]byte, error) {
	pdir := filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p))
	ents, err := os.ReadDir(pdir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // zero-padded base offsets
	var out [][]byte
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(pdir, name))
		if err != nil {
			if os.IsNotExist(err) { // deleted by a truncation or a snapshot install meanwhile
				return nil, fmt.Errorf("segment %s vanished while reading", name)
			}
			return nil, err
		}
		for len(b) >= segment.HeaderSize {
			h, err := segment.ParseHeader(b)
			if err != nil || h.Size() > int64(len(b)) {
				break // a torn tail
			}
			out = append(out, b[:h.Size()])
			b = b[h.Size():]
		}
	}
	return out, nil
}

// batchString names a batch for failure messages.
func batchString(b []byte) string {
	h, err := segment.ParseHeader(b)
	if err != nil {
		return fmt.Sprintf("bad batch %x: %v", b[:min(len(b), segment.HeaderSize)], err)
	}
	return fmt.Sprintf("[%d..%d] epoch %d pid %d seq %d len %d", h.BaseOffset, h.LastOffset(), h.LeaderEpoch, h.ProducerID, h.BaseSequence, len(b))
}

// compareReplicas compares the batches of every replica of each
// partition; it returns the number of batches of one replica and "" when
// all are equal, else the first difference.
func (c *chaosCluster) compareReplicas(topic string, parts int32) (batches int, diff string) {
	for p := int32(0); p < parts; p++ {
		var ref [][]byte
		for i, n := range c.nodes {
			bs, err := replicaBatches(n.dir, topic, p)
			if err != nil {
				return 0, fmt.Sprintf("p%d broker %d: %v", p, n.id, err)
			}
			if i == 0 {
				ref = bs
				batches += len(bs)
				continue
			}
			for j := 0; j < len(ref) || j < len(bs); j++ {
				switch {
				case j >= len(ref):
					return 0, fmt.Sprintf("p%d: broker %d has %d batches, broker %d %d; extra %s", p, n.id, len(bs), c.nodes[0].id, len(ref), batchString(bs[j]))
				case j >= len(bs):
					return 0, fmt.Sprintf("p%d: broker %d has %d batches, broker %d %d; missing %s", p, n.id, len(bs), c.nodes[0].id, len(ref), batchString(ref[j]))
				case !bytes.Equal(ref[j], bs[j]):
					return 0, fmt.Sprintf("p%d batch #%d: broker %d %s, broker %d %s", p, j, c.nodes[0].id, batchString(ref[j]), n.id, batchString(bs[j]))
				}
			}
		}
	}
	return batches, ""
}

// dumpGoroutines makes every running broker print its goroutines into
// its log and exit (SIGQUIT), for a failure that looks like a stall.
func (c *chaosCluster) dumpGoroutines() {
	// Each broker's raft groups first (SIGUSR1: one line per group).
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.cmd != nil {
			n.cmd.Process.Signal(syscall.SIGUSR1)
		}
		n.mu.Unlock()
	}
	time.Sleep(500 * time.Millisecond)
	for _, n := range c.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.cmd = nil
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		c.t.Logf("broker %d: goroutines dumped into %s", n.id, n.log)
	}
}

// checkLogs fails the test on a panic or a Go runtime fatal error in any
// broker's output.
func (c *chaosCluster) checkLogs() {
	c.t.Helper()
	for _, n := range c.nodes {
		f, err := os.Open(n.log)
		if err != nil {
			c.t.Error(err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.Contains(l, "DATA RACE") {
				c.t.Errorf("broker %d: %s", n.id, l)
			}
		}
		f.Close()
	}
}

// grepLogs returns up to max lines of the brokers' logs containing any of
// the words, for the report of a failure.
func (c *chaosCluster) grepLogs(max int, words ...string) string {
	var out []string
	for _, n := range c.nodes {
		b, _ := os.ReadFile(n.log)
		for _, l := range strings.Split(string(b), "\n") {
			for _, w := range words {
				if strings.Contains(l, w) {
					out = append(out, fmt.Sprintf("b%d: %s", n.id, l))
					break
				}
			}
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n")
}

func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = append([]byte("..."), b[len(b)-n:]...)
	}
	return string(b)
}

// ---- the proxies ----

// cutNet is the set of proxies in front of the brokers' replication
// listeners, and which brokers are cut off.
type cutNet struct {
	t     testing.TB
	nodes func() []*chaosNode

	mu      sync.Mutex
	cut     map[int32]bool     // protected by mu
	links   map[*link]struct{} // protected by mu
	lns     []net.Listener     // protected by mu
	closed  bool               // protected by mu
	unknown atomic.Int64       // accepted connections whose dialer was not found
	refused atomic.Int64
	wg      sync.WaitGroup
}

// link is one proxied connection, from broker src (-1 = unknown) to dst.
type link struct {
	src, dst int32
	in, out  net.Conn
}

func (l *link) close() { l.in.Close(); l.out.Close() }

// listen starts the proxy of node and returns its address.
func (cn *cutNet) listen(node *chaosNode) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cn.t.Fatal(err)
	}
	cn.mu.Lock()
	cn.lns = append(cn.lns, ln)
	cn.mu.Unlock()
	cn.wg.Add(1)
	go func() {
		defer cn.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cn.wg.Add(1)
			go func() {
				defer cn.wg.Done()
				cn.handle(c, node)
			}()
		}
	}()
	return ln.Addr().String()
}

func (cn *cutNet) handle(in net.Conn, dst *chaosNode) {
	src := int32(-1)
	for try := 0; try < 3 && src < 0; try++ {
		if src = cn.dialer(in); src < 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if src < 0 {
		cn.unknown.Add(1)
	}
	if !cn.allowed(src, dst.id) {
		cn.refused.Add(1)
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", dst.rep, time.Second)
	if err != nil {
		in.Close()
		return
	}
	l := &link{src: src, dst: dst.id, in: in, out: out}
	cn.mu.Lock()
	if cn.closed || cn.cut[dst.id] || (src >= 0 && cn.cut[src]) {
		cn.mu.Unlock()
		l.close()
		return
	}
	cn.links[l] = struct{}{}
	cn.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(w, r net.Conn) {
		defer wg.Done()
		io.Copy(w, r)
		l.close()
	}
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
	cn.mu.Lock()
	delete(cn.links, l)
	cn.mu.Unlock()
}

func (cn *cutNet) allowed(src, dst int32) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return !cn.closed && !cn.cut[dst] && !(src >= 0 && cn.cut[src])
}

func (cn *cutNet) isCut(id int32) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.cut[id]
}

// isolate cuts broker id off from every other broker: its proxied
// connections, both ways, are closed and new ones refused until heal.
func (cn *cutNet) isolate(id int32) {
	cn.mu.Lock()
	cn.cut[id] = true
	var victims []*link
	for l := range cn.links {
		if l.src == id || l.dst == id {
			victims = append(victims, l)
		}
	}
	cn.mu.Unlock()
	for _, l := range victims {
		l.close()
	}
}

func (cn *cutNet) heal(id int32) {
	cn.mu.Lock()
	delete(cn.cut, id)
	cn.mu.Unlock()
}

func (cn *cutNet) close() {
	cn.mu.Lock()
	cn.closed = true
	lns := cn.lns
	var all []*link
	for l := range cn.links {
		all = append(all, l)
	}
	cn.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, l := range all {
		l.close()
	}
	cn.wg.Wait()
}

// dialer finds which broker process owns the other end of an accepted
// loopback connection: the socket whose local port is the connection's
// remote port, by inode, among the brokers' open files. -1 if none.
func (cn *cutNet) dialer(c net.Conn) int32 {
	ra, ok1 := c.RemoteAddr().(*net.TCPAddr)
	la, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1
	}
	inode := ""
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if inode = socketInode(table, ra.Port, la.Port); inode != "" {
			break
		}
	}
	if inode == "" {
		return -1
	}
	want := "socket:[" + inode + "]"
	for _, n := range cn.nodes() {
		pid := n.pid()
		if pid == 0 {
			continue
		}
		fdDir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if target, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && target == want {
				return n.id
			}
		}
	}
	return -1
}

// socketInode returns the inode of the TCP socket in table (a
// /proc/net/tcp file) with local port lport and remote port rport.
func socketInode(table string, lport, rport int) string {
	f, err := os.Open(table)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		if hexPort(fs[1]) == lport && hexPort(fs[2]) == rport {
			return fs[9]
		}
	}
	return ""
}

func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseUint(addr[i+1:], 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}
