package faults

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-io/strata/internal/faults/check"
	"github.com/strata-io/strata/segment"
)

// node is one `strata serve` process in its namespace.
type node struct {
	id    int
	kafka string // Kafka listener
	addr  string // the address it advertises: the proxy's (kafka in the loopback fallback)
	// control is the broker's fault-injection file (STRATA_FAULTS_CONTROL,
	// cmd/strata/faultinject.go): disk faults and a clock offset.
	control string
	dir     string
	log     string
	args    []string
	nw      *netns

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when not running; protected by mu
	done   chan struct{} // closed when cmd exits; protected by mu
	paused bool          // protected by mu
}

// cluster is the brokers of a run.
type cluster struct {
	bin   string
	nodes []*node
	nw    *netns
	px    *proxy // nil in the loopback fallback
	// diskFaulted are the brokers a disk fault hit since the last heal.
	diskFaulted []*node
}

// brokerEnv is the environment without STRATA_* variables (serve reads
// them as settings and refuses unknown ones; those around a test are the
// tests' own).
func brokerEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			out = append(out, kv)
		}
	}
	return out
}

func newCluster(bin, dir string, nw *netns, n int, hb time.Duration, extra []string) *cluster {
	c := &cluster{bin: bin, nw: nw}
	// With namespaces, peers and clients reach a broker through the
	// proxy (proxy.go): its Raft entry and advertised listener are the
	// proxy's address, and it binds its own.
	adv := nw.ip
	if !nw.loop {
		adv = proxyIP
	}
	var voters []string
	for id := 1; id <= n; id++ {
		voters = append(voters, fmt.Sprintf("%d@%s:9093", id, adv(id)))
	}
	for id := 1; id <= n; id++ {
		nd := &node{id: id, kafka: nw.ip(id) + ":9092", addr: adv(id) + ":9092", nw: nw,
			dir:     filepath.Join(dir, fmt.Sprintf("broker-%d", id)),
			log:     filepath.Join(dir, fmt.Sprintf("broker-%d.log", id)),
			control: filepath.Join(dir, fmt.Sprintf("broker-%d.control", id))}
		nd.args = append([]string{"serve",
			"--set", fmt.Sprintf("node.id=%d", id),
			"--set", "listeners=PLAINTEXT://" + nd.kafka,
			"--set", "advertised.listeners=PLAINTEXT://" + nd.addr,
			"--set", "replication.listener=" + nw.ip(id) + ":9093",
			// The namespaces' addresses are not loopback: plaintext
			// replication there must be allowed (cmd/strata/replication_security.go).
			"--set", "replication.plaintext.allow.nonloopback=true",
			"--set", "log.dirs=" + nd.dir,
			"--set", "controller.quorum.voters=" + strings.Join(voters, ","),
			"--set", fmt.Sprintf("strata.partition.heartbeat.timeout.ms=%d", hb.Milliseconds()),
			"--set", "default.replication.factor=" + fmt.Sprint(min(n, 3)),
		}, extra...)
		c.nodes = append(c.nodes, nd)
	}
	return c
}

func (c *cluster) bootstrap() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr)
	}
	return out
}

// inject writes the broker's fault-injection file: disk is "", "eio",
// "enospc" or "fsync"; clock the offset of its wall clock.
func (n *node) inject(disk string, clock time.Duration) error {
	tmp := n.control + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("disk=%s\nclock=%s\n", disk, clock)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.control)
}

func (n *node) start(bin string) error {
	lf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(lf, "==== faults: start at %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := n.nw.command(n.id, bin, n.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(brokerEnv(), "STRATA_FAULTS_CONTROL="+n.control)
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done, n.paused = cmd, done, false
	n.mu.Unlock()
	return nil
}

func (n *node) running() bool {
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

// signal sends sig to the running process.
func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(sig)
		switch sig {
		case syscall.SIGSTOP:
			n.paused = true
		case syscall.SIGCONT:
			n.paused = false
		}
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (n *node) kill() {
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

// stop SIGTERMs the process (SIGKILL after timeout) and waits.
func (n *node) stop(timeout time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// waitReady polls until the node answers ApiVersions.
func (n *node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !n.running() {
			return fmt.Errorf("broker %d exited during start-up; see %s", n.id, n.log)
		}
		if kafkaAnswers(n.kafka) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("broker %d not ready within %v; see %s", n.id, timeout, n.log)
}

func kafkaAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	// size, api key 18, version 0, correlation id 1, client id null.
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		return false
	}
	var hdr [8]byte
	_, err = io.ReadFull(c, hdr[:])
	return err == nil && hdr[7] == 1
}

// replica reads node's copy of topic-partition from its data directory:
// every whole record batch (a torn tail being written is left out) as
// (base offset, digest of its bytes).
func (n *node) replica(topic string, p int32) (check.Replica, error) {
	r := check.Replica{Broker: int32(n.id), Topic: topic, Partition: p}
	pdir := filepath.Join(n.dir, fmt.Sprintf("%s-%d", topic, p))
	ents, err := os.ReadDir(pdir)
	if err != nil {
		return r, err
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // zero-padded base offsets
	first := true
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(pdir, name))
		if err != nil {
			return r, err
		}
		for len(b) >= segment.HeaderSize {
			h, err := segment.ParseHeader(b)
			if err != nil || h.Size() > int64(len(b)) {
				break // a torn tail
			}
			sum := sha256.Sum256(b[:h.Size()])
			r.Entries = append(r.Entries, check.Rec{Offset: h.BaseOffset, Value: hex.EncodeToString(sum[:8])})
			if first {
				r.Start, first = h.BaseOffset, false
			}
			r.HighWatermark = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return r, nil
}

// logHas reports whether a line of node's log starts with any of the
// prefixes (panics, fatal errors).
func (n *node) logLines(prefixes ...string) []string {
	f, err := os.Open(n.log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(sc.Text(), p) {
				out = append(out, fmt.Sprintf("broker %d: %s", n.id, sc.Text()))
			}
		}
	}
	return out
}
