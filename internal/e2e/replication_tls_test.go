package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestReplicationMTLS: three `strata serve` processes whose replication
// (metadata quorum, every partition's Raft group, forwarded requests)
// runs over mutual TLS with node certificates from `strata certs` (issue
// 19, item 1). Records produced at RF 3 with acks=all survive a SIGKILL
// of a partition leader; then forged peers -- plaintext, a node
// certificate of another CA, a client certificate of the cluster's CA
// (no node ID), a valid certificate of node 9 claiming to be node 2 in
// its preface and in a request -- are refused by the broker they reach,
// which logs each, and every acknowledged record is still there.
func TestReplicationMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	const (
		topic = "mtls"
		parts = int32(3)
	)
	dir, other := t.TempDir(), t.TempDir()
	run(t, time.Minute, "", strataBin, "certs", "ca", "--dir", dir)
	for _, args := range [][]string{{"--node-id", "1"}, {"--node-id", "2"}, {"--node-id", "3"}, {"--node-id", "9"}, {"--name", "client"}} {
		run(t, time.Minute, "", strataBin, append([]string{"certs", "issue", "--dir", dir}, args...)...)
	}
	run(t, time.Minute, "", strataBin, "certs", "ca", "--dir", other)
	run(t, time.Minute, "", strataBin, "certs", "issue", "--dir", other, "--node-id", "1")

	c := startChaosCluster(t, 3, time.Second,
		"--set", "replication.security.protocol=SSL",
		"--set", "replication.ssl.keystore.location="+filepath.Join(dir, "node-{node.id}.pem"),
		"--set", "replication.ssl.truststore.location="+filepath.Join(dir, "ca.pem"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if resp, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	leaders := c.waitLeaders(ctx, adm, topic, parts, 30*time.Second)

	pcl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(time.Minute))
	var want []string
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			v := fmt.Sprintf("r%05d", i)
			want = append(want, v)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %d..%d: %v", from, from+n, err)
		}
	}
	produce(0, 300)

	// A partition leader SIGKILLed: the others elect a leader over TLS
	// and take writes; it comes back and catches up.
	victim := c.node(leaders[0][0])
	victim.kill()
	t.Logf("SIGKILL broker %d (leader of partition 0 at epoch %d)", victim.id, leaders[0][1])
	produce(300, 300)
	victim.start()
	victim.waitReady(60 * time.Second)
	produce(600, 100)

	// Forged peers at broker 1's replication listener (directly, not
	// through the harness's proxy).
	target := c.node(1)
	cert := func(d, name string) tls.Certificate {
		kp, err := tls.LoadX509KeyPair(filepath.Join(d, name+".crt"), filepath.Join(d, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	const kindAppendEntries, logConfiguration = 1, 5
	poison := muxFrame(kindAppendEntries, "__metadata", appendEntriesBody("2", 2, logConfiguration, []byte{0xc1}))
	cases := []struct {
		name    string
		cert    *tls.Certificate // nil: plaintext
		preface []byte
		log     string
	}{
		{"plaintext", nil, replPreface(2, 0, "2"), "TLS handshake failed"},
		{"another CA's node certificate", ptr(cert(other, "node-1")), replPreface(2, 0, "1"), "TLS handshake failed"},
		{"a client certificate of the cluster's CA", ptr(cert(dir, "client")), replPreface(2, 0, "2"), "not a Strata node certificate"},
		{"node 9's certificate claiming node 2", ptr(cert(dir, "node-9")), replPreface(2, 0, "2"), "its certificate names node 9"},
		{"node 9 speaking for node 2", ptr(cert(dir, "node-9")), replPreface(2, 0, "9"), "on a connection of node"},
	}
	for _, tc := range cases {
		before := len(readFile(t, target.log))
		var conn net.Conn
		raw, err := net.DialTimeout("tcp", target.rep, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn = raw
		if tc.cert != nil {
			conn = tls.Client(raw, &tls.Config{Certificates: []tls.Certificate{*tc.cert}, InsecureSkipVerify: true})
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write(tc.preface) // the handshake, then the preface (or a plaintext preface)
		conn.Write(poison)
		buf := make([]byte, 1024)
		for {
			if _, err := conn.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("%s: the broker kept the connection open", tc.name)
				}
				break
			}
		}
		conn.Close()
		testwait.For(t, 10*time.Second, func() bool { return strings.Contains(readFile(t, target.log)[before:], tc.log) },
			"%s: broker 1 logged no %q", tc.name, tc.log)
	}

	// Every acknowledged record is there, once, and the cluster serves.
	for _, n := range c.nodes {
		if !n.running() {
			t.Fatalf("broker %d exited", n.id)
		}
	}
	if logs := c.grepLogs(20, "panic"); logs != "" {
		t.Fatalf("panics:\n%s", logs)
	}
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int{}
	for n := 0; n < len(want) && ctx.Err() == nil; {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; n++ })
	}
	for _, v := range want {
		if got[v] != 1 {
			t.Fatalf("record %s read %d times (%d records read, %d acknowledged)", v, got[v], len(got), len(want))
		}
	}
	produce(700, 10)
}

func ptr[T any](v T) *T { return &v }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplicationTLSThroughput measures produce throughput at RF 3
// (acks=all, 1 KiB uncompressed records, 6 partitions) on three brokers
// whose replication is PLAINTEXT and then mutual TLS, each cluster started
// afresh, two rounds interleaved. STRATA_BENCH_SECURITY=1 runs it
// (docs/ARCHITECTURE.md, "Broker-to-broker security").
func TestReplicationTLSThroughput(t *testing.T) {
	if os.Getenv("STRATA_BENCH_SECURITY") == "" {
		t.Skip("STRATA_BENCH_SECURITY=1 runs it")
	}
	dir := t.TempDir()
	run(t, time.Minute, "", strataBin, "certs", "ca", "--dir", dir)
	for i := 1; i <= 3; i++ {
		run(t, time.Minute, "", strataBin, "certs", "issue", "--dir", dir, "--node-id", fmt.Sprint(i))
	}
	tlsArgs := []string{"--set", "replication.security.protocol=SSL",
		"--set", "replication.ssl.keystore.location=" + filepath.Join(dir, "node-{node.id}.pem"),
		"--set", "replication.ssl.truststore.location=" + filepath.Join(dir, "ca.pem")}
	res := map[string][]float64{}
	for round := 0; round < 2; round++ {
		for _, mode := range []string{"PLAINTEXT", "SSL"} {
			var args []string
			if mode == "SSL" {
				args = tlsArgs
			}
			t.Run(fmt.Sprintf("%s-%d", mode, round), func(t *testing.T) {
				c := startChaosCluster(t, 3, 2*time.Second, args...)
				rate := produceRate(t, c, 5*time.Second)
				res[mode] = append(res[mode], rate)
				t.Logf("%s round %d: %.0f records/s, %.1f MB/s", mode, round, rate, rate*1024/1e6)
			})
		}
	}
	for i := range res["SSL"] {
		t.Logf("round %d: mTLS/PLAINTEXT replication, RF 3 produce: %.2f", i, res["SSL"][i]/res["PLAINTEXT"][i])
	}
}

// produceRate produces 1 KiB records to a new 6-partition RF 3 topic for
// d with acks=all and returns the acknowledged records per second.
func produceRate(t *testing.T, c *chaosCluster, d time.Duration) float64 {
	t.Helper()
	const parts = int32(6)
	ctx := context.Background()
	adm := kadm.NewClient(c.client())
	if resp, err := adm.CreateTopic(ctx, parts, 3, nil, "rate"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.waitLeaders(ctx, adm, "rate", parts, 30*time.Second)
	value := bytes.Repeat([]byte{0x5a, 0xa5, 0x3c, 0xc3}, 256)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("rate"), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var n atomic.Int64
	sem := make(chan struct{}, 2000)
	begin := time.Now()
	for stop := begin.Add(d); time.Now().Before(stop); {
		sem <- struct{}{}
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err == nil {
				n.Add(1)
			}
			<-sem
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return float64(n.Load()) / time.Since(begin).Seconds()
}

// TestPlaintextReplicationOffLoopbackRefused: `strata serve` with a
// PLAINTEXT replication listener on an address other than loopback stops
// at start with a configuration error that says why and what to set.
func TestPlaintextReplicationOffLoopbackRefused(t *testing.T) {
	cmd := exec.Command(strataBin, "serve", "--set", "node.id=1", "--set", "listeners=PLAINTEXT://"+freeAddr(t),
		"--set", "log.dirs="+t.TempDir(), "--set", "controller.quorum.voters=1@10.0.0.1:9093,2@10.0.0.2:9093,3@10.0.0.3:9093")
	cmd.Env = brokerEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("serve did not fail: %v\n%s", err, out)
	}
	for _, want := range []string{"10.0.0.1:9093", "not a loopback address", "replication.security.protocol=SSL", "replication.plaintext.allow.nonloopback=true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not say %q:\n%s", want, out)
		}
	}
}
