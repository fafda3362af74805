package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// rolesCluster is controllers (process.roles unset: broker,controller,
// named in controller.quorum.voters) and broker-only nodes
// (process.roles=broker), real strata processes on loopback.
type rolesCluster struct {
	t      *testing.T
	base   int
	dir    string
	voters string
	nodes  map[int32]*chaosNode
	// controllerRole is the controllers' process.roles: "" (broker and
	// controller) or "controller" (controller-only).
	controllerRole string
	ctrlOnly       map[int32]bool
	// extra settings of every node; "{node.id}" stands for its ID.
	extra []string
}

func startRolesCluster(t *testing.T, controllerRole string, controllers int, brokers []int32, extra ...string) *rolesCluster {
	t.Helper()
	var offs []int
	for i := 0; i < 10; i++ {
		offs = append(offs, i, 100+i)
	}
	c := &rolesCluster{t: t, base: freePortRun(t, offs...), dir: t.TempDir(), nodes: map[int32]*chaosNode{},
		controllerRole: controllerRole, ctrlOnly: map[int32]bool{}, extra: extra}
	var vs []string
	for i := 1; i <= controllers; i++ {
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", i, c.base+100+i-1))
	}
	c.voters = strings.Join(vs, ",")
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
		if t.Failed() {
			for id, n := range c.nodes {
				t.Logf("node %d log (tail):\n%s", id, fileTail(n.log, 8000))
			}
		}
	})
	for i := 1; i <= controllers; i++ {
		c.add(int32(i), false)
	}
	for _, id := range brokers {
		c.add(id, true)
	}
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	return c
}

// waitReady waits until n serves: Kafka requests, or for a
// controller-only node (no Kafka listener) its "ready" log line.
func (c *rolesCluster) waitReady(n *chaosNode) {
	c.t.Helper()
	if !c.ctrlOnly[n.id] {
		n.waitReady(60 * time.Second)
		return
	}
	testwait.For(c.t, 60*time.Second, func() bool {
		if !n.running() {
			c.t.Fatalf("controller %d exited during start-up; see %s", n.id, n.log)
		}
		return strings.Contains(fileTail(n.log, 1<<20), "strata controller ready")
	}, "controller %d not ready; see %s", n.id, n.log)
	if kafkaAnswersV0(n.kafka) {
		c.t.Fatalf("controller-only node %d answers Kafka requests at %s", n.id, n.kafka)
	}
}

// add starts node id (a broker-only node when brokerOnly); the caller
// waits for it (waitReady).
func (c *rolesCluster) add(id int32, brokerOnly bool) *chaosNode {
	n := &chaosNode{t: c.t, id: id,
		kafka: fmt.Sprintf("127.0.0.1:%d", c.base+int(id)-1),
		rep:   fmt.Sprintf("127.0.0.1:%d", c.base+100+int(id)-1),
		dir:   filepath.Join(c.dir, fmt.Sprintf("node-%d", id)),
		log:   filepath.Join(c.dir, fmt.Sprintf("node-%d.log", id)),
	}
	n.args = []string{"serve",
		"--set", fmt.Sprintf("node.id=%d", id),
		"--set", "listeners=PLAINTEXT://" + n.kafka,
		"--set", "log.dirs=" + n.dir,
		"--set", "controller.quorum.voters=" + c.voters,
		"--set", "strata.partition.heartbeat.timeout.ms=500",
		// Short, so that a broker-only node the controller did not hear
		// from would be fenced (and missing from Metadata) in the test.
		"--set", "broker.session.timeout.ms=3000",
	}
	if brokerOnly {
		n.args = append(n.args, "--set", "process.roles=broker", "--set", "replication.listener="+n.rep)
	} else if c.controllerRole != "" {
		n.args = append(n.args, "--set", "process.roles="+c.controllerRole)
		c.ctrlOnly[id] = c.controllerRole == "controller"
	}
	tls := false
	for _, a := range c.extra {
		n.args = append(n.args, strings.ReplaceAll(a, "{node.id}", strconv.Itoa(int(id))))
		tls = tls || strings.HasPrefix(a, "replication.security.protocol=SSL")
	}
	if !tls {
		// Plaintext: the controllers admit joining nodes only when told.
		n.args = append(n.args, "--set", "replication.plaintext.allow.nonloopback=true")
	}
	c.nodes[id] = n
	n.start()
	return n
}

func (c *rolesCluster) client(opts ...kgo.Opt) *kgo.Client {
	var seeds []string
	for id, n := range c.nodes {
		if !c.ctrlOnly[id] {
			seeds = append(seeds, n.kafka)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(time.Second)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// metadataBrokers is the broker list node id answers Metadata with.
func (c *rolesCluster) metadataBrokers(ctx context.Context, id int32) ([]int32, int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[id].kafka))
	if err != nil {
		return nil, -1, err
	}
	defer cl.Close()
	kr, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, -1, err
	}
	var ids []int32
	for _, b := range kr.Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, kr.ControllerID, nil
}

// waitBrokers waits until every running node lists exactly want.
func (c *rolesCluster) waitBrokers(ctx context.Context, want []int32) {
	c.t.Helper()
	var last string
	if !testwait.Until(60*time.Second, func() bool {
		for id, n := range c.nodes {
			if !n.running() || c.ctrlOnly[id] {
				continue
			}
			got, _, err := c.metadataBrokers(ctx, id)
			last = fmt.Sprintf("node %d: %v %v", id, got, err)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				return false
			}
		}
		return true
	}) {
		c.t.Fatalf("Metadata's brokers are not %v within 60s: %s", want, last)
	}
}

// waitPlaced waits until topic's partitions have a leader among their
// replicas, and none of them on a node in not.
func waitPlaced(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, parts int, not ...int32) kadm.TopicDetail {
	t.Helper()
	var last string
	var td kadm.TopicDetail
	if !testwait.Until(60*time.Second, func() bool {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			last = err.Error()
			return false
		}
		td = tds[topic]
		last = fmt.Sprint(td.Partitions, td.Err)
		if len(td.Partitions) != parts {
			return false
		}
		for _, p := range td.Partitions {
			// Not the whole ISR: after a reassignment the leader's ISR
			// report can miss the replica added (reported to the lead).
			if p.Leader < 0 || !hasNode(p.Replicas, p.Leader) {
				return false
			}
			for _, n := range not {
				if hasNode(p.Replicas, n) {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("%s: not placed within 60s: %s", topic, last)
	}
	return td
}

// TestBrokerOnlyNodes: three controllers (controller.quorum.voters) and
// two broker-only nodes (process.roles=broker, Raft non-voters of the
// metadata group). Topics live on the broker-only nodes alone; clients
// produce and consume through them; the controller is SIGKILLed while a
// producer writes (writes go on); a third broker-only node is added and
// one removed (its partitions reassigned away, then UnregisterBroker).
func TestBrokerOnlyNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("five brokers: not in -short")
	}
	testRoles(t, "")
}

// TestControllerOnlyNodes: the same with three controller-only nodes
// (process.roles=controller): no Kafka listener on them, never in
// Metadata's broker list, no replica on them; Metadata names a
// broker-only node as the controller (it forwards).
func TestControllerOnlyNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("five nodes: not in -short")
	}
	testRoles(t, "controller")
}

// TestControllerOnlyNodesMTLS: TestControllerOnlyNodes with mutual TLS
// on the replication transport: broker-only nodes, unknown to the
// controllers until they join, are admitted by their node certificates.
func TestControllerOnlyNodesMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("five nodes: not in -short")
	}
	dir := t.TempDir()
	run(t, time.Minute, "", strataBin, "certs", "ca", "--dir", dir)
	for i := 1; i <= 6; i++ {
		run(t, time.Minute, "", strataBin, "certs", "issue", "--dir", dir, "--node-id", strconv.Itoa(i))
	}
	testRoles(t, "controller",
		"--set", "replication.security.protocol=SSL",
		"--set", "replication.ssl.keystore.location="+filepath.Join(dir, "node-{node.id}.pem"),
		"--set", "replication.ssl.truststore.location="+filepath.Join(dir, "ca.pem"))
}

func testRoles(t *testing.T, controllerRole string, extra ...string) {
	c := startRolesCluster(t, controllerRole, 3, []int32{4, 5}, extra...)
	ctrlOnly := controllerRole == "controller"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	want := func(ids ...int32) []int32 {
		if ctrlOnly {
			return ids
		}
		return append([]int32{1, 2, 3}, ids...)
	}
	c.waitBrokers(ctx, want(4, 5))
	for _, id := range []int32{4, 5} {
		_, ctrl, err := c.metadataBrokers(ctx, id)
		if err != nil || (!ctrlOnly && (ctrl < 1 || ctrl > 3)) || (ctrlOnly && ctrl != id) {
			t.Fatalf("node %d names controller %d (%v)", id, ctrl, err)
		}
	}
	// DescribeQuorum: the broker-only nodes are observers, not voters.
	qreq := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qp := kmsg.NewDescribeQuorumRequestTopicPartition()
	qt.Partitions = append(qt.Partitions, qp)
	qreq.Topics = append(qreq.Topics, qt)
	cl := c.client()
	var quorum string
	var leader int32
	if !testwait.Until(30*time.Second, func() bool {
		qr, err := qreq.RequestWith(ctx, cl)
		if err != nil || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 {
			quorum = fmt.Sprint(err)
			return false
		}
		p := qr.Topics[0].Partitions[0]
		var voters, observers []int32
		for _, v := range p.CurrentVoters {
			voters = append(voters, v.ReplicaID)
		}
		for _, o := range p.Observers {
			observers = append(observers, o.ReplicaID)
		}
		sort.Slice(voters, func(i, j int) bool { return voters[i] < voters[j] })
		sort.Slice(observers, func(i, j int) bool { return observers[i] < observers[j] })
		quorum = fmt.Sprintf("voters %v observers %v", voters, observers)
		leader = p.LeaderID
		return quorum == "voters [1 2 3] observers [4 5]"
	}) {
		t.Fatalf("DescribeQuorum: %s; want voters [1 2 3] observers [4 5]", quorum)
	}

	adm := kadm.NewClient(cl)
	const topic = "on-brokers"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for p, rs := range [][]int32{{4, 5}, {5, 4}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), rs
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	cr, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cr.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s on brokers 4 and 5: %v", topic, err)
	}
	waitPlaced(t, ctx, adm, topic, 2, 1, 2, 3)
	if ctrlOnly {
		// Automatic placement uses the brokers only; an explicit one
		// naming a controller-only node is refused.
		if _, err := adm.CreateTopic(ctx, 4, 2, nil, "auto-placed"); err != nil {
			t.Fatal(err)
		}
		waitPlaced(t, ctx, adm, "auto-placed", 4, 1, 2, 3)
		bad := kmsg.NewPtrCreateTopicsRequest()
		bt := kmsg.NewCreateTopicsRequestTopic()
		bt.Topic, bt.NumPartitions, bt.ReplicationFactor = "on-a-controller", -1, -1
		ba := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ba.Replicas = []int32{4, 1}
		bt.ReplicaAssignment = append(bt.ReplicaAssignment, ba)
		bad.Topics = append(bad.Topics, bt)
		br, err := bad.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := br.Topics[0].ErrorCode; code == 0 {
			t.Fatalf("a topic with a replica on controller-only node 1 was created")
		} else {
			t.Logf("a replica on controller-only node 1: %v", kerr.ErrorForCode(code))
		}
	}

	// Produce (acks=all) while the controller is SIGKILLed.
	pcl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var acked sync.Map
	var nAcked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("r%06d", i)
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			err := pcl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
			pcancel()
			if err == nil {
				acked.Store(v, true)
				nAcked.Add(1)
			}
		}
	}()
	waitAcked := func(n int64, why string) {
		t.Helper()
		if !testwait.Until(60*time.Second, func() bool { return nAcked.Load() >= n }) {
			close(stop)
			t.Fatalf("%s: %d records acknowledged, want %d", why, nAcked.Load(), n)
		}
	}
	waitAcked(200, "before the controller is killed")
	qr, err := qreq.RequestWith(ctx, cl)
	if err == nil && len(qr.Topics) == 1 && len(qr.Topics[0].Partitions) == 1 {
		leader = qr.Topics[0].Partitions[0].LeaderID
	}
	ctrl := leader
	if err != nil || ctrl < 1 || ctrl > 3 {
		close(stop)
		t.Fatalf("controller %d: %v", ctrl, err)
	}
	c.nodes[ctrl].kill()
	at := nAcked.Load()
	t.Logf("controller %d SIGKILLed after %d acknowledged writes", ctrl, at)
	waitAcked(at+500, "after the controller was killed")
	close(stop)
	wg.Wait()
	c.nodes[ctrl].start()
	c.waitReady(c.nodes[ctrl])
	// A broker-only node restarted asks to join again: nothing changes
	// (the same observers), and it serves again.
	c.nodes[4].kill()
	c.nodes[4].start()
	c.waitReady(c.nodes[4])
	c.waitBrokers(ctx, want(4, 5))
	if !testwait.Until(30*time.Second, func() bool {
		qr, err := qreq.RequestWith(ctx, cl)
		if err != nil || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 {
			return false
		}
		var obs []int32
		for _, o := range qr.Topics[0].Partitions[0].Observers {
			obs = append(obs, o.ReplicaID)
		}
		sort.Slice(obs, func(i, j int) bool { return obs[i] < obs[j] })
		quorum = fmt.Sprint(obs)
		return quorum == "[4 5]"
	}) {
		t.Fatalf("observers after node 4's restart: %s; want [4 5]", quorum)
	}

	consumeAll := func(want int64) {
		t.Helper()
		ccl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := map[string]bool{}
		if !testwait.Until(60*time.Second, func() bool {
			fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
			defer fcancel()
			fs := ccl.PollFetches(fctx)
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			missing := int64(0)
			acked.Range(func(k, _ any) bool {
				if !seen[k.(string)] {
					missing++
				}
				return true
			})
			return missing == 0
		}) {
			t.Fatalf("consumed %d distinct records; %d were acknowledged, some missing", len(seen), want)
		}
		ccl.Close()
	}
	consumeAll(nAcked.Load())
	t.Logf("%d acknowledged records all consumed", nAcked.Load())

	// Add broker 6; move broker 5's replicas to it; unregister 5.
	c.add(6, true).waitReady(60 * time.Second)
	c.waitBrokers(ctx, want(4, 5, 6))
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, []int32{4, 6})
	req.Assign(topic, 1, []int32{6, 4})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res {
		for _, p := range ps {
			if p.Err != nil {
				t.Fatalf("reassign %s-%d: %v", p.Topic, p.Partition, p.Err)
			}
		}
	}
	waitPlaced(t, ctx, adm, topic, 2, 1, 2, 3, 5)
	c.nodes[5].kill()
	var uerr error
	testwait.Until(30*time.Second, func() bool {
		ureq := kmsg.NewPtrUnregisterBrokerRequest()
		ureq.BrokerID = 5
		resp, err := ureq.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		uerr = err
		return !errors.Is(uerr, kerr.NotController)
	})
	if uerr != nil {
		t.Fatalf("unregister broker 5: %v", uerr)
	}
	c.waitBrokers(ctx, want(4, 6))
	consumeAll(nAcked.Load())
}

// TestDevClusterControllers: `strata dev-cluster --controllers 3
// --brokers 2` (README "Roles") starts three controller-only nodes and
// two broker-only nodes: its bootstrap names the brokers only, Metadata
// lists them only, and a topic at its default replication factor (2)
// takes writes and reads them back; Ctrl-C stops it all.
func TestDevClusterControllers(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	port := freePortRun(t, 0, 1, 2, 3, 4, 100, 101, 102, 103, 104)
	cmd := exec.Command(strataBin, "dev-cluster", "--controllers", "3", "--brokers", "2", "--dir", t.TempDir(), "--port", fmt.Sprint(port))
	cmd.Env = brokerEnv()
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gone := make(chan error, 1)
	go func() { gone <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-gone:
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("dev-cluster output:\n%s", out.String())
		}
	})
	re := regexp.MustCompile(`(?m)^bootstrap: (.*)$`)
	var m []string
	testwait.For(t, 90*time.Second, func() bool { m = re.FindStringSubmatch(out.String()); return m != nil },
		"no bootstrap line from dev-cluster")
	want := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", port+3, port+4)
	if m[1] != want {
		t.Fatalf("bootstrap %s, want the broker-only nodes %s", m[1], want)
	}
	if !strings.Contains(out.String(), "3 controllers") {
		t.Fatalf("dev-cluster did not say it runs 3 controllers:\n%s", out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(m[1], ",")...), kgo.DefaultProduceTopic("dev"),
		kgo.ConsumeTopics("dev"), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kr, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, b := range kr.Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if fmt.Sprint(ids) != "[4 5]" {
		t.Fatalf("Metadata lists brokers %v, want [4 5]", ids)
	}
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 1, -1, nil, "dev"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	waitPlaced(t, ctx, adm, "dev", 1, 1, 2, 3)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	got := 0
	testwait.For(t, 30*time.Second, func() bool {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		defer fcancel()
		got += cl.PollFetches(fctx).NumRecords()
		return got >= 10
	}, "consumed %d of 10 records", got)
	td, _ := adm.ListTopics(ctx, "dev")
	if rs := td["dev"].Partitions[0].Replicas; len(rs) != 2 {
		t.Fatalf("replicas %v: want the default replication factor 2 (both brokers)", rs)
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's output and the
// test's reads at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBrokerOnlyCatchUp measures how long a broker-only node added to a
// cluster with STRATA_ROLES_CATCHUP_TOPICS topics (one partition each on
// node 4) takes to join the metadata quorum and catch up (its "metadata
// caught up" log line), and to be ready: docs/SCALING.md. Not in CI
// (unset: skipped).
func TestBrokerOnlyCatchUp(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRATA_ROLES_CATCHUP_TOPICS"))
	if n <= 0 {
		t.Skip("set STRATA_ROLES_CATCHUP_TOPICS=N to measure")
	}
	c := startRolesCluster(t, "controller", 3, []int32{4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	for i := 0; i < n; i += 100 {
		var names []string
		for j := i; j < min(n, i+100); j++ {
			names = append(names, fmt.Sprintf("t%05d", j))
		}
		rs, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("create %s: %v", r.Topic, r.Err)
			}
		}
	}
	start := time.Now()
	n5 := c.add(5, true)
	c.waitReady(n5)
	ready := time.Since(start)
	re := regexp.MustCompile(`metadata caught up with the controller.* commands=(\d+) .*took=(\S+)`)
	m := re.FindStringSubmatch(fileTail(n5.log, 1<<20))
	t.Logf("%d topics: a new broker-only node caught up %v (metadata commands %v) and answered Kafka requests %v after its start",
		n, m[2:], m[1:2], ready.Round(time.Millisecond))
}
