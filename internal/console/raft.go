package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The per-broker Raft view. Each broker's console answers
// /ui/api/raft/local with its own Raft figures, read from its metrics
// (replication/metrics.go: the metadata quorum's leadership, the
// partition groups it leads and hosts, elections, pre-votes and
// leaderships won by group, commit latency and heartbeat round
// histograms, snapshot installs), with their change over the last
// minute. /ui/api/raft, on the broker serving the page, puts together
// every broker's: the metadata quorum from DescribeQuorum (API 55: each
// voter's log end, lag behind the commit index, last fetch), the
// partition groups each leads and follows from Metadata, and each
// broker's own figures from its console, found at the address its
// DescribeConfigs reports as metrics.listener (serve sets it to the bound
// address). A broker whose console cannot be reached is listed with the
// error, from what Metadata and DescribeQuorum say.

// Latency summarises a histogram of seconds: its count and, when the
// count is not 0, its mean and estimated 50th and 99th percentiles in
// milliseconds (linear within a bucket, as Prometheus'
// histogram_quantile).
type Latency struct {
	Count uint64   `json:"count"`
	Mean  *float64 `json:"meanMs,omitempty"`
	P50   *float64 `json:"p50Ms,omitempty"`
	P99   *float64 `json:"p99Ms,omitempty"`
}

// LocalRaft is one broker's own Raft figures.
type LocalRaft struct {
	NodeID int32 `json:"nodeId"`
	At     int64 `json:"at"` // unix ms
	// MetadataLeader: this broker leads the metadata quorum (the active
	// controller).
	MetadataLeader bool `json:"metadataLeader"`
	// Led and Hosted are the partition groups it leads and has a replica
	// of; UnderReplicated those it leads with an ISR short of the
	// replicas.
	Led             int `json:"led"`
	Hosted          int `json:"hosted"`
	UnderReplicated int `json:"underReplicated"`
	// Elections, PreVotes and LeaderChanges count, by group (metadata or
	// partition), the elections it started, the pre-vote rounds it sent
	// and the leaderships it won since it started.
	Elections        map[string]float64 `json:"elections"`
	PreVotes         map[string]float64 `json:"preVotes"`
	LeaderChanges    map[string]float64 `json:"leaderChanges"`
	SnapshotInstalls float64            `json:"snapshotInstalls"`
	// Commit is the proposal-to-apply latency of its leaders by group
	// since it started; HeartbeatRound a heartbeat round's send to answer.
	Commit         map[string]Latency `json:"commit"`
	HeartbeatRound Latency            `json:"heartbeatRound"`
	// Recent is the change over the last minute or so (absent until two
	// readings are that far apart).
	Recent *RaftRecent `json:"recent,omitempty"`
}

// RaftRecent is the change of a broker's Raft figures between an earlier
// reading and now.
type RaftRecent struct {
	Seconds       float64            `json:"seconds"`
	Elections     map[string]float64 `json:"elections"`
	LeaderChanges map[string]float64 `json:"leaderChanges"`
	Commit        map[string]Latency `json:"commit"`
}

// raftReading is what the recent figures are computed from.
type raftReading struct {
	at            time.Time
	elections     map[string]float64
	leaderChanges map[string]float64
	commit        map[string]*dto.Histogram
}

// Readings are kept at least readingEvery apart for readingsKept; Recent
// compares now with the newest reading at least recentWindow old (or the
// oldest, once it is readingEvery old).
const (
	readingEvery = 10 * time.Second
	readingsKept = 13
	recentWindow = time.Minute
)

// raftState is a console's own readings and its cache of the other
// brokers' console addresses.
type raftState struct {
	mu       sync.Mutex
	readings []raftReading

	addrMu  sync.Mutex
	addrs   map[int32]string // node -> metrics.listener as it reports it
	addrsAt time.Time
}

// addrTTL bounds how long the other brokers' console addresses are
// trusted before DescribeConfigs is asked again.
const addrTTL = 30 * time.Second

var raftGroups = []string{"metadata", "partition"}

// localRaft reads this broker's Raft figures from its metrics.
func (c *Console) localRaft() LocalRaft {
	m := c.gather()
	now := time.Now()
	out := LocalRaft{NodeID: c.opts.NodeID, At: now.UnixMilli(), Elections: map[string]float64{}, PreVotes: map[string]float64{},
		LeaderChanges: map[string]float64{}, Commit: map[string]Latency{}}
	one := func(name string) float64 {
		var sum float64
		for _, s := range m[name] {
			sum += s.value
		}
		return sum
	}
	out.MetadataLeader = one("kafka_controller_kafkacontroller_activecontrollercount") > 0
	out.Led = int(one("kafka_server_replicamanager_leadercount"))
	out.Hosted = int(one("kafka_server_replicamanager_partitioncount"))
	out.UnderReplicated = int(one("kafka_server_replicamanager_underreplicatedpartitions"))
	out.SnapshotInstalls = one("strata_partition_snapshot_installs_total")
	byGroup := func(name string, dst map[string]float64) {
		for _, g := range raftGroups {
			dst[g] = 0
		}
		for _, s := range m[name] {
			dst[s.labels["group"]] += s.value
		}
	}
	byGroup("strata_raft_elections_total", out.Elections)
	byGroup("strata_raft_prevotes_total", out.PreVotes)
	byGroup("strata_raft_leader_changes_total", out.LeaderChanges)
	commit := map[string]*dto.Histogram{}
	for _, s := range m["strata_raft_commit_seconds"] {
		if s.hist != nil {
			commit[s.labels["group"]] = s.hist
			out.Commit[s.labels["group"]] = latency(s.hist, nil)
		}
	}
	for _, s := range m["strata_raft_heartbeat_round_seconds"] {
		if s.hist != nil {
			out.HeartbeatRound = latency(s.hist, nil)
		}
	}
	cur := raftReading{at: now, elections: out.Elections, leaderChanges: out.LeaderChanges, commit: commit}
	out.Recent = c.raft.recent(cur)
	return out
}

// recent records cur (when the newest reading is readingEvery old) and
// returns the change since the reading closest to recentWindow ago.
func (r *raftState) recent(cur raftReading) *RaftRecent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.readings); n == 0 || cur.at.Sub(r.readings[n-1].at) >= readingEvery {
		r.readings = append(r.readings, cur)
		if len(r.readings) > readingsKept {
			r.readings = r.readings[1:]
		}
	}
	var base *raftReading
	for i := len(r.readings) - 1; i >= 0; i-- {
		if cur.at.Sub(r.readings[i].at) >= recentWindow {
			base = &r.readings[i]
			break
		}
	}
	if base == nil && len(r.readings) > 0 && cur.at.Sub(r.readings[0].at) >= readingEvery {
		base = &r.readings[0]
	}
	if base == nil {
		return nil
	}
	out := &RaftRecent{Seconds: cur.at.Sub(base.at).Seconds(), Elections: map[string]float64{}, LeaderChanges: map[string]float64{}, Commit: map[string]Latency{}}
	for _, g := range raftGroups {
		out.Elections[g] = max(cur.elections[g]-base.elections[g], 0)
		out.LeaderChanges[g] = max(cur.leaderChanges[g]-base.leaderChanges[g], 0)
		if h := cur.commit[g]; h != nil {
			out.Commit[g] = latency(h, base.commit[g])
		}
	}
	return out
}

// latency summarises h, less prev's counts when prev is not nil (the
// observations between the two).
func latency(h, prev *dto.Histogram) Latency {
	count := h.GetSampleCount()
	sum := h.GetSampleSum()
	bs := h.GetBucket()
	cum := make([]float64, len(bs))
	for i, b := range bs {
		cum[i] = float64(b.GetCumulativeCount())
	}
	if prev != nil && prev.GetSampleCount() <= count && len(prev.GetBucket()) == len(bs) {
		count -= prev.GetSampleCount()
		sum -= prev.GetSampleSum()
		for i, b := range prev.GetBucket() {
			cum[i] -= float64(b.GetCumulativeCount())
		}
	}
	out := Latency{Count: count}
	if count == 0 {
		return out
	}
	ms := func(s float64) *float64 { v := math.Round(s*1e6) / 1e3; return &v }
	out.Mean = ms(sum / float64(count))
	quantile := func(q float64) *float64 {
		rank := q * float64(count)
		lower, below := 0.0, 0.0
		for i, b := range bs {
			upper := b.GetUpperBound()
			if cum[i] >= rank {
				if math.IsInf(upper, 1) {
					return ms(lower) // beyond the last bound: its lower edge
				}
				in := cum[i] - below
				if in <= 0 {
					return ms(upper)
				}
				return ms(lower + (upper-lower)*(rank-below)/in)
			}
			lower, below = upper, cum[i]
		}
		return ms(lower) // above every bound
	}
	out.P50, out.P99 = quantile(0.5), quantile(0.99)
	return out
}

func (c *Console) raftLocal(_ context.Context, _ *http.Request) (any, error) {
	return c.localRaft(), nil
}

// brokerRaft is one broker's row of the Raft view.
type brokerRaft struct {
	NodeID int32  `json:"nodeId"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	// Quorum is its part in the metadata quorum as DescribeQuorum reports
	// it: leader, voter or observer ("" when not listed).
	Quorum string `json:"quorum"`
	// LogEnd is its metadata log's end and Behind how far that is behind
	// the commit index (-1: unknown); LastFetchAgo the milliseconds since
	// the controller last heard from it (-1: unknown).
	LogEnd       int64 `json:"logEnd"`
	Behind       int64 `json:"behind"`
	LastFetchAgo int64 `json:"lastFetchAgoMs"`
	// Leads and Follows count the partitions whose leader it is and
	// those it is a replica of but does not lead, from Metadata.
	Leads   int `json:"leads"`
	Follows int `json:"follows"`
	// Console is its console's address (its metrics.listener); Local its
	// own figures from there, or Err why not.
	Console string     `json:"console,omitempty"`
	Local   *LocalRaft `json:"local,omitempty"`
	Err     string     `json:"error,omitempty"`
}

type raftResp struct {
	// The metadata quorum: its leader (the controller), epoch and commit
	// index; QuorumErr when DescribeQuorum failed.
	QuorumLeader  int32        `json:"quorumLeader"`
	QuorumEpoch   int32        `json:"quorumEpoch"`
	HighWatermark int64        `json:"highWatermark"`
	QuorumErr     string       `json:"quorumError,omitempty"`
	Serving       int32        `json:"serving"` // the broker answering
	Brokers       []brokerRaft `json:"brokers"`
}

func (c *Console) raftView(ctx context.Context, _ *http.Request) (any, error) {
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	out := raftResp{QuorumLeader: -1, QuorumEpoch: -1, HighWatermark: -1, Serving: c.opts.NodeID, Brokers: []brokerRaft{}}
	idx := map[int32]*brokerRaft{}
	for _, b := range md.Brokers {
		out.Brokers = append(out.Brokers, brokerRaft{NodeID: b.NodeID, Host: b.Host, Port: b.Port, LogEnd: -1, Behind: -1, LastFetchAgo: -1})
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].NodeID < out.Brokers[j].NodeID })
	for i := range out.Brokers {
		idx[out.Brokers[i].NodeID] = &out.Brokers[i]
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if b := idx[r]; b != nil {
					if r == p.Leader {
						b.Leads++
					} else {
						b.Follows++
					}
				}
			}
		}
	}
	c.describeQuorum(ctx, &out, idx)
	addrs := c.consoleAddrs(ctx, out.Brokers)
	var wg sync.WaitGroup
	for i := range out.Brokers {
		b := &out.Brokers[i]
		if b.NodeID == c.opts.NodeID && c.opts.NodeID >= 0 {
			l := c.localRaft()
			b.Local = &l
			continue
		}
		addr, ok := addrs[b.NodeID]
		if !ok {
			b.Err = "its console's address is unknown (no metrics.listener in its DescribeConfigs)"
			continue
		}
		b.Console = consoleURL(addr, b.Host)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.fetchLocal(ctx, b.Console)
			if err != nil {
				b.Err = err.Error()
				return
			}
			if l.NodeID != b.NodeID {
				b.Err = fmt.Sprintf("the console at %s is broker %d's", b.Console, l.NodeID)
				return
			}
			b.Local = l
		}()
	}
	wg.Wait()
	return out, nil
}

// describeQuorum fills the metadata quorum's part of out.
func (c *Console) describeQuorum(ctx context.Context, out *raftResp, idx map[int32]*brokerRaft) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = fmt.Errorf("DescribeQuorum: %d topics in the answer", len(resp.Topics))
	}
	if err != nil {
		out.QuorumErr = err.Error()
		return
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		out.QuorumErr = err.Error()
		return
	}
	out.QuorumLeader, out.QuorumEpoch, out.HighWatermark = p.LeaderID, p.LeaderEpoch, p.HighWatermark
	now := time.Now().UnixMilli()
	mark := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		for _, r := range rs {
			b := idx[r.ReplicaID]
			if b == nil {
				continue
			}
			b.Quorum = role
			if r.ReplicaID == p.LeaderID {
				b.Quorum = "leader"
			}
			b.LogEnd = r.LogEndOffset
			if r.LogEndOffset >= 0 && p.HighWatermark >= 0 {
				b.Behind = max(p.HighWatermark-r.LogEndOffset, 0)
			}
			if r.LastFetchTimestamp > 0 {
				b.LastFetchAgo = max(now-r.LastFetchTimestamp, 0)
			}
		}
	}
	mark(p.CurrentVoters, "voter")
	mark(p.Observers, "observer")
}

// consoleAddrs returns each broker's metrics.listener as its
// DescribeConfigs reports it, cached for addrTTL (asked again when a
// broker is missing).
func (c *Console) consoleAddrs(ctx context.Context, brokers []brokerRaft) map[int32]string {
	r := &c.raft
	r.addrMu.Lock()
	defer r.addrMu.Unlock()
	var ids []int32
	for _, b := range brokers {
		if b.NodeID == c.opts.NodeID {
			continue
		}
		if _, ok := r.addrs[b.NodeID]; !ok || time.Since(r.addrsAt) > addrTTL {
			ids = append(ids, b.NodeID)
		}
	}
	if len(ids) == 0 {
		return r.addrs
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rcs, _ := c.adm.DescribeBrokerConfigs(qctx, ids...)
	next := map[int32]string{}
	for id, a := range r.addrs {
		next[id] = a
	}
	for _, rc := range rcs {
		id, err := strconv.ParseInt(rc.Name, 10, 32)
		if err != nil || rc.Err != nil {
			continue
		}
		delete(next, int32(id))
		for _, cf := range rc.Configs {
			if cf.Key == "metrics.listener" && cf.Value != nil && *cf.Value != "" {
				next[int32(id)] = *cf.Value
			}
		}
	}
	r.addrs, r.addrsAt = next, time.Now()
	return next
}

// consoleURL is the base URL of a broker's console at addr (its
// metrics.listener), a wildcard host replaced by the broker's advertised
// host.
func consoleURL(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		h = host
	}
	return "http://" + net.JoinHostPort(h, port)
}

// peerTimeout bounds the question to another broker's console.
const peerTimeout = 3 * time.Second

var peerClient = &http.Client{Timeout: peerTimeout}

// fetchLocal asks the console at base for its broker's Raft figures.
func (c *Console) fetchLocal(ctx context.Context, base string) (*LocalRaft, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/api/raft/local", nil)
	if err != nil {
		return nil, err
	}
	resp, err := peerClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("its console at %s: %v", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("its console at %s: %v", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("its console at %s: %s", base, resp.Status)
	}
	var l LocalRaft
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("its console at %s: %v", base, err)
	}
	return &l, nil
}
