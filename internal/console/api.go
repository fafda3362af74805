package console

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/dlq"
)

// --- info and cluster ---

type infoResp struct {
	Admin       bool   `json:"admin"`       // admin actions are on
	AdminHere   bool   `json:"adminHere"`   // and allowed for this request
	AdminReason string `json:"adminReason"` // why not, if not
	// SignIn: this request may run admin actions once it authenticates
	// (HTTP basic auth as a SCRAM user); Principal who it is when it did.
	SignIn    bool   `json:"signIn"`
	Principal string `json:"principal,omitempty"`
	ACLs      bool   `json:"acls"` // ACLs decide an authenticated user's actions
	History   Stats  `json:"history"`
	Redrive   bool   `json:"redrive"` // a redrive action exists
}

func (c *Console) info(_ context.Context, r *http.Request) (any, error) {
	id, status, why := c.adminAllowed(r)
	return infoResp{Admin: c.opts.Admin, AdminHere: status == 0, AdminReason: why, SignIn: status == http.StatusUnauthorized,
		Principal: id.principal, ACLs: c.opts.Auth.Authorizer != nil, History: c.hist.Stats(), Redrive: c.opts.Actions.Redrive != nil}, nil
}

type brokerJSON struct {
	NodeID     int32   `json:"nodeId"`
	Host       string  `json:"host"`
	Port       int32   `json:"port"`
	Rack       *string `json:"rack,omitempty"`
	Controller bool    `json:"controller"`
	Leaders    int     `json:"leaders"`  // partitions it leads (metadata)
	Replicas   int     `json:"replicas"` // partitions with a replica on it
}

type clusterResp struct {
	ClusterID  string       `json:"clusterId"`
	Controller int32        `json:"controller"`
	Brokers    []brokerJSON `json:"brokers"`
	Topics     int          `json:"topics"`
	Partitions int          `json:"partitions"`
	// UnderReplicated and Offline count partitions from metadata: ISR
	// smaller than the replicas, and no leader.
	UnderReplicated int `json:"underReplicated"`
	Offline         int `json:"offline"`
	// Local is the serving broker's own Raft view, from its metrics.
	Local map[string]float64 `json:"local"`
}

// localSeries are the serving broker's metrics the cluster page shows,
// summed over their labels.
var localSeries = []string{
	"kafka_server_replicamanager_leadercount", "kafka_server_replicamanager_partitioncount",
	"kafka_server_replicamanager_underreplicatedpartitions", "kafka_controller_kafkacontroller_activecontrollercount",
	"kafka_controller_kafkacontroller_offlinepartitionscount", "strata_raft_elections_total",
	"strata_raft_leader_changes_total", "strata_partition_snapshot_installs_total",
}

func (c *Console) cluster(ctx context.Context, _ *http.Request) (any, error) {
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	out := clusterResp{ClusterID: md.Cluster, Controller: md.Controller, Local: map[string]float64{}}
	byID := map[int32]*brokerJSON{}
	for _, b := range md.Brokers {
		out.Brokers = append(out.Brokers, brokerJSON{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == md.Controller})
	}
	for i := range out.Brokers {
		byID[out.Brokers[i].NodeID] = &out.Brokers[i]
	}
	for _, t := range md.Topics {
		out.Topics++
		for _, p := range t.Partitions {
			out.Partitions++
			if b := byID[p.Leader]; b != nil {
				b.Leaders++
			} else {
				out.Offline++
			}
			for _, r := range p.Replicas {
				if b := byID[r]; b != nil {
					b.Replicas++
				}
			}
			if len(p.ISR) < len(p.Replicas) {
				out.UnderReplicated++
			}
		}
	}
	m := c.gather()
	for _, name := range localSeries {
		if ss, ok := m[name]; ok {
			var sum float64
			for _, s := range ss {
				sum += s.value
			}
			out.Local[name] = sum
		}
	}
	return out, nil
}

// --- topics ---

type topicRow struct {
	Name       string `json:"name"`
	Internal   bool   `json:"internal"`
	Partitions int    `json:"partitions"`
	RF         int    `json:"replicationFactor"`
	Records    int64  `json:"records"` // end - start, summed
	Bytes      int64  `json:"bytes"`   // on the leaders' disks
	URP        int    `json:"underReplicated"`
}

// sizes returns the bytes of each partition on its leader (log dirs).
func (c *Console) sizes(ctx context.Context, md kadm.Metadata, topics kadm.TopicsSet) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	dirs, err := c.adm.DescribeAllLogDirs(ctx, topics)
	if err != nil {
		return out
	}
	for broker, ds := range dirs {
		for _, d := range ds {
			for t, ps := range d.Topics {
				td, ok := md.Topics[t]
				if !ok {
					continue
				}
				for p, dp := range ps {
					if pd, ok := td.Partitions[p]; ok && pd.Leader == broker {
						if out[t] == nil {
							out[t] = map[int32]int64{}
						}
						out[t][p] = dp.Size
					}
				}
			}
		}
	}
	return out
}

func (c *Console) topics(ctx context.Context, _ *http.Request) (any, error) {
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	names := md.Topics.Names()
	starts, _ := c.adm.ListStartOffsets(ctx, names...)
	ends, _ := c.adm.ListEndOffsets(ctx, names...)
	sizes := c.sizes(ctx, md, md.Topics.TopicsSet())
	rows := []topicRow{}
	for _, n := range names {
		t := md.Topics[n]
		row := topicRow{Name: n, Internal: t.IsInternal, Partitions: len(t.Partitions)}
		for p, pd := range t.Partitions {
			row.RF = max(row.RF, len(pd.Replicas))
			if len(pd.ISR) < len(pd.Replicas) {
				row.URP++
			}
			s, ok1 := starts.Lookup(n, p)
			e, ok2 := ends.Lookup(n, p)
			if ok1 && ok2 && s.Err == nil && e.Err == nil {
				row.Records += max(e.Offset-s.Offset, 0)
			}
			row.Bytes += sizes[n][p]
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

type partitionRow struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Start       int64   `json:"start"`
	End         int64   `json:"end"`
	Bytes       int64   `json:"bytes"`
	Err         string  `json:"error,omitempty"`
}

type configRow struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

type topicResp struct {
	Name       string         `json:"name"`
	ID         string         `json:"id"`
	Internal   bool           `json:"internal"`
	Partitions []partitionRow `json:"partitions"`
	Configs    []configRow    `json:"configs"`
}

func (c *Console) topic(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("topic")
	md, err := c.adm.Metadata(ctx, name)
	if err != nil {
		return nil, err
	}
	t, ok := md.Topics[name]
	if !ok || t.Err != nil {
		return nil, notFound(fmt.Sprintf("topic %q: %v", name, kerr.UnknownTopicOrPartition))
	}
	starts, _ := c.adm.ListStartOffsets(ctx, name)
	ends, _ := c.adm.ListEndOffsets(ctx, name)
	sizes := c.sizes(ctx, md, md.Topics.TopicsSet())
	out := topicResp{Name: name, ID: t.ID.String(), Internal: t.IsInternal, Partitions: []partitionRow{}, Configs: []configRow{}}
	for _, pd := range t.Partitions.Sorted() {
		row := partitionRow{Partition: pd.Partition, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch, Replicas: pd.Replicas, ISR: pd.ISR,
			Start: -1, End: -1, Bytes: sizes[name][pd.Partition]}
		if pd.Err != nil {
			row.Err = pd.Err.Error()
		}
		if s, ok := starts.Lookup(name, pd.Partition); ok && s.Err == nil {
			row.Start = s.Offset
		}
		if e, ok := ends.Lookup(name, pd.Partition); ok && e.Err == nil {
			row.End = e.Offset
		}
		out.Partitions = append(out.Partitions, row)
	}
	if rcs, err := c.adm.DescribeTopicConfigs(ctx, name); err == nil {
		for _, rc := range rcs {
			for _, cf := range rc.Configs {
				out.Configs = append(out.Configs, configRow{Name: cf.Key, Value: cf.Value, Source: configSource(cf.Source), Sensitive: cf.Sensitive})
			}
		}
	}
	sort.Slice(out.Configs, func(i, j int) bool { return out.Configs[i].Name < out.Configs[j].Name })
	return out, nil
}

// configSource names a config's source as kafka-configs prints it.
func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "DYNAMIC_TOPIC_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "DYNAMIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "STATIC_BROKER_CONFIG"
	case kmsg.ConfigSourceDefaultConfig:
		return "DEFAULT_CONFIG"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "DYNAMIC_BROKER_LOGGER_CONFIG"
	}
	return "UNKNOWN"
}

// --- records ---

// Bytes is a key, value or header value decoded for display: the text
// when it is UTF-8, JSON re-indented when it parses, and hex always (of at
// most maxShown bytes).
type Bytes struct {
	Null      bool   `json:"null,omitempty"`
	Size      int    `json:"size"`
	Text      string `json:"text,omitempty"`
	IsText    bool   `json:"isText"`
	JSON      string `json:"json,omitempty"`
	Hex       string `json:"hex"`
	Truncated bool   `json:"truncated,omitempty"`
}

// maxShown bounds the bytes of one field the browser is sent.
const maxShown = 4096

func decode(b []byte, null bool) Bytes {
	out := Bytes{Null: null, Size: len(b)}
	if null {
		return out
	}
	shown := b
	if len(shown) > maxShown {
		shown, out.Truncated = shown[:maxShown], true
	}
	out.Hex = hex.EncodeToString(shown)
	if utf8.Valid(b) {
		out.IsText, out.Text = true, string(shown)
		if !out.Truncated && json.Valid(b) {
			var v any
			if json.Unmarshal(b, &v) == nil {
				if ind, err := json.MarshalIndent(v, "", "  "); err == nil {
					out.JSON = string(ind)
				}
			}
		}
	}
	return out
}

type headerJSON struct {
	Key   string `json:"key"`
	Value Bytes  `json:"value"`
}

type recordJSON struct {
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"` // unix ms
	Key       Bytes        `json:"key"`
	Value     Bytes        `json:"value"`
	Headers   []headerJSON `json:"headers"`
}

type recordsResp struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	From      int64        `json:"from"`
	Start     int64        `json:"start"`
	End       int64        `json:"end"`
	Records   []recordJSON `json:"records"`
}

// maxBrowse bounds the records of one page of the browser.
const maxBrowse = 200

// records reads up to limit records of one partition from offset (or the
// first at or after timestamp, unix ms), without a group.
func (c *Console) records(ctx context.Context, r *http.Request) (any, error) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil || p < 0 {
		return nil, badRequest("partition: expected a partition number")
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return nil, badRequest("limit: expected a positive number")
		}
		limit = min(limit, maxBrowse)
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	s, ok1 := starts.Lookup(topic, int32(p))
	e, ok2 := ends.Lookup(topic, int32(p))
	if !ok1 || !ok2 {
		return nil, notFound(fmt.Sprintf("%s[%d]: %v", topic, p, kerr.UnknownTopicOrPartition))
	}
	if s.Err != nil || e.Err != nil {
		return nil, fmt.Errorf("%s[%d]: %v %v", topic, p, s.Err, e.Err)
	}
	from := s.Offset
	switch {
	case q.Get("timestamp") != "":
		ms, err := strconv.ParseInt(q.Get("timestamp"), 10, 64)
		if err != nil {
			return nil, badRequest("timestamp: expected unix milliseconds")
		}
		lo, err := c.adm.ListOffsetsAfterMilli(ctx, ms, topic)
		if err != nil {
			return nil, err
		}
		if o, ok := lo.Lookup(topic, int32(p)); ok && o.Err == nil && o.Offset >= 0 {
			from = o.Offset
		} else {
			from = e.Offset
		}
	case q.Get("offset") != "":
		off, err := strconv.ParseInt(q.Get("offset"), 10, 64)
		if err != nil {
			return nil, badRequest("offset: expected a number")
		}
		if off < 0 { // from the end: -N is the last N records
			off = e.Offset + off
		}
		from = off
	}
	from = max(s.Offset, min(from, e.Offset))
	out := recordsResp{Topic: topic, Partition: int32(p), From: from, Start: s.Offset, End: e.Offset, Records: []recordJSON{}}
	recs, err := c.read(ctx, topic, int32(p), from, e.Offset, limit)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		rj := recordJSON{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(),
			Key: decode(rec.Key, rec.Key == nil), Value: decode(rec.Value, rec.Value == nil), Headers: []headerJSON{}}
		for _, h := range rec.Headers {
			rj.Headers = append(rj.Headers, headerJSON{Key: h.Key, Value: decode(h.Value, false)})
		}
		out.Records = append(out.Records, rj)
	}
	return out, nil
}

// read fetches records [from, end) of one partition, at most limit, with
// a client of its own (no group, read committed as consumers see them).
func (c *Console) read(ctx context.Context, topic string, p int32, from, end int64, limit int) ([]*kgo.Record, error) {
	if from >= end {
		return nil, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.opts.Bootstrap), kgo.ClientID("strata-console"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.FetchMaxBytes(4 << 20), kgo.FetchMaxPartitionBytes(1 << 20)}, c.opts.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < limit {
		fs := cl.PollRecords(ctx, limit-len(out))
		if err := ctx.Err(); err != nil {
			break // what arrived is the page; the end may hold only control records
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, ferr
		}
		done := false
		fs.EachRecord(func(rec *kgo.Record) {
			if len(out) < limit {
				out = append(out, rec)
			}
			if rec.Offset+1 >= end {
				done = true
			}
		})
		if done {
			break
		}
	}
	return out, nil
}

// --- consumer groups ---

type groupRow struct {
	Group   string `json:"group"`
	Type    string `json:"type"` // consumer, classic or share
	State   string `json:"state"`
	Members int    `json:"members"`
	Lag     int64  `json:"lag"` // summed; -1: unknown
}

func (c *Console) groups(ctx context.Context, _ *http.Request) (any, error) {
	listed, err := c.adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	rows := []groupRow{}
	var consumer, share []string
	for _, l := range listed.Sorted() {
		typ := l.GroupType
		if typ == "" {
			typ = "classic"
		}
		rows = append(rows, groupRow{Group: l.Group, Type: typ, State: l.State, Lag: -1})
		if typ == "share" {
			share = append(share, l.Group)
		} else {
			consumer = append(consumer, l.Group)
		}
	}
	idx := map[string]*groupRow{}
	for i := range rows {
		idx[rows[i].Group] = &rows[i]
	}
	if len(consumer) > 0 {
		if lags, err := c.adm.Lag(ctx, consumer...); err == nil {
			for g, l := range lags {
				if row := idx[g]; row != nil && l.Error() == nil {
					row.Members = len(l.Members)
					row.Lag = l.Lag.Total()
				}
			}
		}
	}
	if len(share) > 0 {
		if ds, err := c.adm.DescribeShareGroups(ctx, share...); err == nil {
			for g, d := range ds {
				if row := idx[g]; row != nil && d.Err == nil {
					row.Members = len(d.Members)
				}
			}
		}
		if offs, err := c.adm.DescribeShareGroupOffsets(ctx, share...); err == nil {
			for g, d := range offs {
				row := idx[g]
				if row == nil || d.Err != nil {
					continue
				}
				var sum int64
				for _, ps := range d.Offsets {
					for _, o := range ps {
						if o.Err == nil && o.Lag > 0 {
							sum += o.Lag
						}
					}
				}
				row.Lag = sum
			}
		}
	}
	return rows, nil
}

type memberJSON struct {
	MemberID   string             `json:"memberId"`
	InstanceID *string            `json:"instanceId,omitempty"`
	ClientID   string             `json:"clientId"`
	ClientHost string             `json:"clientHost"`
	Assignment map[string][]int32 `json:"assignment"`
}

type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: none
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"` // -1: unknown
	Member    string `json:"member,omitempty"`
	Trend     *Trend `json:"trend,omitempty"`
	Err       string `json:"error,omitempty"`
}

type groupResp struct {
	Group      string           `json:"group"`
	State      string           `json:"state"`
	Protocol   string           `json:"protocol"`
	Members    []memberJSON     `json:"members"`
	Partitions []groupPartition `json:"partitions"`
	Lag        int64            `json:"lag"`
}

func (c *Console) group(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("group")
	lags, err := c.adm.Lag(ctx, name)
	if err != nil {
		return nil, err
	}
	l, ok := lags[name]
	if !ok {
		return nil, notFound(fmt.Sprintf("group %q: %v", name, kerr.GroupIDNotFound))
	}
	if err := l.Error(); err != nil {
		return nil, fmt.Errorf("group %q: %w", name, err)
	}
	out := groupResp{Group: name, State: l.State, Protocol: l.Protocol, Members: []memberJSON{}, Partitions: []groupPartition{}, Lag: l.Lag.Total()}
	for _, m := range l.Members {
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: map[string][]int32{}}
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				mj.Assignment[t.Topic] = t.Partitions
			}
		}
		out.Members = append(out.Members, mj)
	}
	for _, ml := range l.Lag.Sorted() {
		gp := groupPartition{Topic: ml.Topic, Partition: ml.Partition, Committed: -1, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Commit.At >= 0 && ml.Commit.Topic != "" {
			gp.Committed = ml.Commit.At
		}
		if ml.Member != nil {
			gp.Member = ml.Member.ClientID + " " + ml.Member.MemberID
		}
		if ml.Err != nil {
			gp.Err = ml.Err.Error()
		}
		if t, ok := c.hist.Trend(SeriesKey{name, ml.Topic, ml.Partition}); ok {
			gp.Trend = &t
		}
		out.Partitions = append(out.Partitions, gp)
	}
	return out, nil
}

// --- the lag sampler ---

func (c *Console) sampleLoop(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.opts.SampleEvery)
	defer t.Stop()
	for {
		c.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce records every consumer group's lag per partition.
func (c *Console) sampleOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(c.opts.SampleEvery, 5*time.Second))
	defer cancel()
	listed, err := c.adm.ListGroups(ctx)
	if err != nil {
		return
	}
	var groups, shares []string
	for _, l := range listed {
		if l.GroupType == "share" {
			shares = append(shares, l.Group)
		} else {
			groups = append(groups, l.Group)
		}
	}
	var samples []Sample
	if len(groups) > 0 {
		lags, err := c.adm.Lag(ctx, groups...)
		if err != nil {
			return
		}
		for g, l := range lags {
			if l.Error() != nil {
				continue
			}
			for _, ml := range l.Lag.Sorted() {
				if ml.Err != nil || ml.Commit.At < 0 || ml.Commit.Topic == "" {
					continue
				}
				samples = append(samples, Sample{Key: SeriesKey{g, ml.Topic, ml.Partition}, End: ml.End.Offset, Committed: ml.Commit.At})
			}
		}
	}
	if len(shares) > 0 {
		samples = append(samples, c.shareSamples(ctx, shares)...)
	}
	if ctx.Err() != nil {
		return
	}
	c.hist.Record(time.Now(), samples)
}

// shareSamples are the share groups' lag per partition, as the sampler
// records consumer groups' lag: the partition's end offset, and as the
// group's position the end less the share-partition lag
// (DescribeShareGroupOffsets), so that the same History and
// lagrate.Window give its sparkline, growth and time to drain.
func (c *Console) shareSamples(ctx context.Context, groups []string) []Sample {
	offs, err := c.adm.DescribeShareGroupOffsets(ctx, groups...)
	if err != nil && len(offs) == 0 {
		return nil
	}
	topics := map[string]bool{}
	for _, d := range offs {
		for t := range d.Offsets {
			topics[t] = true
		}
	}
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := c.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil
	}
	var out []Sample
	for g, d := range offs {
		if d.Err != nil {
			continue
		}
		for _, ps := range d.Offsets {
			for _, o := range ps {
				e, ok := ends.Lookup(o.Topic, o.Partition)
				if o.Err != nil || o.Lag < 0 || !ok || e.Err != nil {
					continue
				}
				out = append(out, Sample{Key: SeriesKey{g, o.Topic, o.Partition}, End: e.Offset, Committed: e.Offset - o.Lag})
			}
		}
	}
	return out
}

// --- share groups ---

type shareMember struct {
	MemberID   string             `json:"memberId"`
	ClientID   string             `json:"clientId"`
	ClientHost string             `json:"clientHost"`
	Assignment map[string][]int32 `json:"assignment"`
}

type sharePartition struct {
	Topic        string           `json:"topic"`
	Partition    int32            `json:"partition"`
	StartOffset  int64            `json:"startOffset"`
	Lag          int64            `json:"lag"`
	InFlight     *float64         `json:"inFlight,omitempty"`
	Trend        *Trend           `json:"trend,omitempty"` // the lag history, as a consumer group's
	Acknowledged map[string]int64 `json:"acknowledged"`    // by type (accept, release, reject, ...)
	Archived     map[string]int64 `json:"archived"`        // by cause
	Err          string           `json:"error,omitempty"`
}

type deadLetter struct {
	Partition int32             `json:"partition"` // in the dead-letter topic
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Reason    string            `json:"reason"`
	Message   string            `json:"message"`
	Source    string            `json:"source"` // topic[partition]@offset
	Delivery  string            `json:"deliveryCount"`
	Value     Bytes             `json:"value"`
	Headers   map[string]string `json:"headers"`
}

type shareResp struct {
	Group       string           `json:"group"`
	State       string           `json:"state"`
	Epoch       int32            `json:"epoch"`
	Paused      bool             `json:"paused"`
	Members     []shareMember    `json:"members"`
	Partitions  []sharePartition `json:"partitions"`
	DLQTopic    string           `json:"dlqTopic"`
	DeadLetters []deadLetter     `json:"deadLetters"`
	// DeadLetterCounts are this broker's letters written, by reason (all
	// groups: the metric has no group label).
	Note string `json:"note,omitempty"`
}

// dlqTopicConfig names a share group's dead-letter topic (KIP-1191).
const dlqTopicConfig = "errors.deadletterqueue.topic.name"

// pausedConfig is the flood guard's pause (groupconfig.FloodPaused).
const pausedConfig = "strata.share.dlq.flood.paused"

// maxLetters bounds the dead letters a share group page shows (the newest).
const maxLetters = 50

func (c *Console) shareGroup(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("group")
	out := shareResp{Group: name, Members: []shareMember{}, Partitions: []sharePartition{}, DeadLetters: []deadLetter{}}
	ds, err := c.adm.DescribeShareGroups(ctx, name)
	if err != nil {
		return nil, err
	}
	if d, ok := ds[name]; ok && d.Err == nil {
		out.State, out.Epoch = d.GroupState, d.GroupEpoch
		for _, m := range d.Members {
			sm := shareMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: map[string][]int32{}}
			for t, ps := range m.Assignment {
				for p := range ps {
					sm.Assignment[t] = append(sm.Assignment[t], p)
				}
				sort.Slice(sm.Assignment[t], func(i, j int) bool { return sm.Assignment[t][i] < sm.Assignment[t][j] })
			}
			out.Members = append(out.Members, sm)
		}
	} else if ok {
		out.State = "-"
		out.Note = d.Err.Error()
	}
	offs, err := c.adm.DescribeShareGroupOffsets(ctx, name)
	if err != nil {
		return nil, err
	}
	m := c.gather()
	if d, ok := offs[name]; ok && d.Err == nil {
		for _, ps := range d.Offsets {
			for _, o := range ps {
				sp := sharePartition{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset, Lag: o.Lag,
					Acknowledged: map[string]int64{}, Archived: map[string]int64{}}
				if o.Err != nil {
					sp.Err = o.Err.Error()
				}
				if t, ok := c.hist.Trend(SeriesKey{name, o.Topic, o.Partition}); ok {
					sp.Trend = &t
				}
				match := func(s sample) bool {
					return s.labels["group"] == name && s.labels["topic"] == o.Topic && s.labels["partition"] == strconv.Itoa(int(o.Partition))
				}
				for _, s := range m["strata_share_records_in_flight"] {
					if match(s) {
						v := s.value
						sp.InFlight = &v
					}
				}
				for _, s := range m["strata_share_acknowledgements_total"] {
					if match(s) {
						sp.Acknowledged[s.labels["type"]] += int64(s.value)
					}
				}
				for _, s := range m["strata_share_records_archived_total"] {
					if match(s) {
						sp.Archived[s.labels["cause"]] += int64(s.value)
					}
				}
				out.Partitions = append(out.Partitions, sp)
			}
		}
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	if (out.State == "" || out.State == "-" || out.State == "Dead") && len(out.Partitions) == 0 {
		return nil, notFound(fmt.Sprintf("share group %q: %v", name, kerr.GroupIDNotFound))
	}
	// The group's configs: its dead-letter topic and the flood guard.
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, name
	res.ConfigNames = []string{dlqTopicConfig, pausedConfig}
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, c.cl); err == nil {
		for _, rr := range resp.Resources {
			for _, cf := range rr.Configs {
				if cf.Value == nil {
					continue
				}
				switch cf.Name {
				case dlqTopicConfig:
					out.DLQTopic = *cf.Value
				case pausedConfig:
					out.Paused = strings.EqualFold(*cf.Value, "true")
				}
			}
		}
	}
	if out.DLQTopic != "" {
		letters, err := c.deadLetters(ctx, out.DLQTopic, name)
		if err != nil {
			out.Note = strings.TrimSpace(out.Note + " dead-letter topic " + out.DLQTopic + ": " + err.Error())
		}
		out.DeadLetters = append(out.DeadLetters, letters...)
	}
	return out, nil
}

// deadLetters reads the newest letters of group from topic (at most
// maxLetters per partition looked at), newest first.
func (c *Console) deadLetters(ctx context.Context, topic, group string) ([]deadLetter, error) {
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	var ferr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			ferr = e.Err
			return
		}
		s, _ := starts.Lookup(topic, e.Partition)
		from := max(s.Offset, e.Offset-maxLetters)
		recs, err := c.read(ctx, topic, e.Partition, from, e.Offset, maxLetters)
		if err != nil {
			ferr = err
			return
		}
		for _, rec := range recs {
			h := map[string]string{}
			for _, hd := range rec.Headers {
				h[hd.Key] = string(hd.Value)
			}
			if g, ok := h["__dlq.errors.group"]; ok && g != group {
				continue
			}
			out = append(out, deadLetter{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(),
				Reason: h["strata.dlq.reason"], Message: h["__dlq.errors.message"],
				Source:   fmt.Sprintf("%s[%s]@%s", h["__dlq.errors.topic"], h["__dlq.errors.partition"], h["__dlq.errors.offset"]),
				Delivery: h["__dlq.errors.delivery.count"], Value: decode(rec.Value, rec.Value == nil), Headers: h})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Timestamp > out[j].Timestamp })
	if len(out) > maxLetters {
		out = out[:maxLetters]
	}
	return out, ferr
}

// --- admin actions ---

type actionResp struct {
	Output string `json:"output"`
	Done   bool   `json:"done"` // false: a plan only
}

type resetReq struct {
	Topic   string `json:"topic"`
	To      string `json:"to"`
	Execute bool   `json:"execute"`
}

func (c *Console) resetOffsets(ctx context.Context, r *http.Request) (any, error) {
	if c.opts.Actions.ResetOffsets == nil {
		return nil, notFound("reset-offsets is not available")
	}
	var req resetReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, badRequest("body: " + err.Error())
	}
	// As OffsetFetch (a plan) and OffsetCommit (its execution).
	op := acl.Describe
	if req.Execute {
		op = acl.Read
	}
	if err := c.authorize(ctx, check{op, acl.Group, r.PathValue("group")}, check{op, acl.Topic, req.Topic}); err != nil {
		return nil, err
	}
	out, err := c.opts.Actions.ResetOffsets(ctx, c.adm, r.PathValue("group"), req.Topic, req.To, req.Execute)
	if err != nil {
		return nil, &httpError{http.StatusConflict, err.Error()}
	}
	return actionResp{Output: out, Done: req.Execute}, nil
}

type deleteReq struct {
	Share bool `json:"share"`
}

func (c *Console) deleteGroup(ctx context.Context, r *http.Request) (any, error) {
	if c.opts.Actions.DeleteGroup == nil {
		return nil, notFound("delete is not available")
	}
	var req deleteReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, badRequest("body: " + err.Error())
	}
	if err := c.authorize(ctx, check{acl.Delete, acl.Group, r.PathValue("group")}); err != nil { // as DeleteGroups
		return nil, err
	}
	out, err := c.opts.Actions.DeleteGroup(ctx, c.adm, r.PathValue("group"), req.Share)
	if err != nil {
		return nil, &httpError{http.StatusConflict, err.Error()}
	}
	return actionResp{Output: out, Done: true}, nil
}

func (c *Console) resumeShare(ctx context.Context, r *http.Request) (any, error) {
	if c.opts.Actions.ResumeShare == nil {
		return nil, notFound("resume is not available")
	}
	// As IncrementalAlterConfigs of the group's config, which it is.
	if err := c.authorize(ctx, check{acl.AlterConfigs, acl.Group, r.PathValue("group")}); err != nil {
		return nil, err
	}
	out, err := c.opts.Actions.ResumeShare(ctx, r.PathValue("group"))
	if err != nil {
		return nil, &httpError{http.StatusConflict, err.Error()}
	}
	return actionResp{Output: out, Done: true}, nil
}

type redriveReq struct {
	Reason  string `json:"reason"`
	Execute bool   `json:"execute"`
}

func (c *Console) redrive(ctx context.Context, r *http.Request) (any, error) {
	if c.opts.Actions.Redrive == nil {
		return nil, notFound("redrive is not available")
	}
	var req redriveReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, badRequest("body: " + err.Error())
	}
	if err := c.authorize(ctx, c.redriveChecks(ctx, r.PathValue("group"), req.Execute)...); err != nil {
		return nil, err
	}
	out, err := c.opts.Actions.Redrive(ctx, r.PathValue("group"), req.Reason, req.Execute)
	if err != nil {
		return nil, &httpError{http.StatusConflict, strings.TrimSpace(out + "\n" + err.Error())}
	}
	return actionResp{Output: out, Done: req.Execute}, nil
}

// redriveChecks are the ACLs a redrive needs: a plan reads the group's
// dead-letter topic (DESCRIBE the group, READ the topic); its execution
// also consumes it as the group (READ) and re-publishes, in transactions
// of the redrive's transactional ID (WRITE), to the topics the group
// consumes (WRITE each: the letters' sources are among them).
func (c *Console) redriveChecks(ctx context.Context, group string, execute bool) []check {
	if c.opts.Auth.Authorizer == nil {
		return nil
	}
	out := []check{{acl.Describe, acl.Group, group}}
	if execute {
		out[0].op = acl.Read
	}
	if t := c.groupDLQTopic(ctx, group); t != "" {
		out = append(out, check{acl.Read, acl.Topic, t})
	}
	if !execute {
		return out
	}
	out = append(out, check{acl.Write, acl.TransactionalID, dlq.TransactionalID(group)})
	if offs, err := c.adm.DescribeShareGroupOffsets(ctx, group); err == nil {
		var topics []string
		for t := range offs[group].Offsets {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			out = append(out, check{acl.Write, acl.Topic, t})
		}
	}
	return out
}

// groupDLQTopic is group's dead-letter topic ("" when none or unknown).
func (c *Console) groupDLQTopic(ctx context.Context, group string) string {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.ConfigNames = []string{dlqTopicConfig}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return ""
	}
	for _, rr := range resp.Resources {
		for _, cf := range rr.Configs {
			if cf.Name == dlqTopicConfig && cf.Value != nil {
				return *cf.Value
			}
		}
	}
	return ""
}
