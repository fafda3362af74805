package protocol

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// configNode is one broker on a data directory that a test can stop and
// start again (the restart tests).
type configNode struct {
	t    *testing.T
	dir  string
	cfg  Config
	s    *Server
	b    *replication.Broker
	addr string
	done chan error
}

func startConfigNode(t *testing.T, dir string, cfg Config) *configNode {
	t.Helper()
	n := &configNode{t: t, dir: dir, cfg: cfg}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *configNode) start() {
	n.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	logs, err := log.OpenManager(log.ManagerOptions{Dir: n.dir, Logger: quiet})
	if err != nil {
		n.t.Fatal(err)
	}
	b, err := replication.NewBroker(replication.BrokerConfig{
		NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port), DataDir: n.dir,
		NumPartitions: 1, DefaultReplicationFactor: 1, AutoCreateTopics: true, DeleteTopicEnable: true, Logger: quiet,
	}, logs)
	if err != nil {
		logs.Close()
		n.t.Fatal(err)
	}
	cfg := n.cfg
	cfg.Logger = quiet
	n.b, n.s, n.addr, n.done = b, NewServer(cfg, b), ln.Addr().String(), make(chan error, 1)
	go func() { n.done <- n.s.Serve(ln) }()
}

func (n *configNode) stop() {
	if n.s == nil {
		return
	}
	n.s.Close()
	<-n.done
	n.b.Close()
	if p := n.s.panics.Load(); p != 0 {
		n.t.Errorf("%d handler panics", p)
	}
	n.s = nil
}

func (n *configNode) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

// alterGroup sends one IncrementalAlterConfigs on GROUP group and returns
// the resource's code and message.
func alterGroup(t *testing.T, cl *kgo.Client, group string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("alter %s: %v %+v", group, err, resp)
	}
	msg := ""
	if m := resp.Resources[0].ErrorMessage; m != nil {
		msg = *m
	}
	return resp.Resources[0].ErrorCode, msg
}

func setOp(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	return c
}

func deleteOp(name string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, kmsg.IncrementalAlterConfigOpDelete
	return c
}

// describeGroup returns GROUP group's configs by name (with synonyms).
func describeGroup(t *testing.T, cl *kgo.Client, group string) (int16, map[string]kmsg.DescribeConfigsResponseResourceConfig) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources, req.IncludeSynonyms, req.IncludeDocumentation = append(req.Resources, rr), true, true
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("describe %s: %v", group, err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return resp.Resources[0].ErrorCode, out
}

// TestGroupConfigsOverTheWire: franz-go sets, deletes and describes a
// share group's configs (GROUP resources) through IncrementalAlterConfigs,
// AlterConfigs and DescribeConfigs; values outside the broker's bounds get
// INVALID_CONFIG naming the key; the share-partition leader's lookup sees
// every change; and the configs survive a restart.
func TestGroupConfigsOverTheWire(t *testing.T) {
	dir := t.TempDir()
	// A test broker that lowers Kafka's minimum lock duration to 1 s, as
	// the share tests do.
	cfg := Config{GroupConfig: groupconfig.Broker{ShareMinRecordLockDuration: time.Second, ShareRecordLockDuration: 2 * time.Second}}
	n := startConfigNode(t, dir, cfg)
	cl := n.client()

	if st := n.s.shareSettings("jobs"); st.lock != 2*time.Second || st.deliveryLimit != 5 || st.maxLocks != 2000 ||
		st.reset.Kind != groupconfig.ResetLatest || st.readCommitted || !st.renew {
		t.Fatalf("defaults: %+v", st)
	}
	for _, tc := range []struct {
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
		msg  string
	}{
		{setOp("share.record.lock.duration.ms", "999"), kerr.InvalidConfig.Code, "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"},
		{setOp("share.record.lock.duration.ms", "60001"), kerr.InvalidConfig.Code, "share.record.lock.duration.ms must be in the range 1000 to 60000 inclusive."},
		{setOp("share.delivery.count.limit", "11"), kerr.InvalidConfig.Code, "share.delivery.count.limit must be in the range 2 to 10 inclusive."},
		{setOp("share.isolation.level", "serializable"), kerr.InvalidConfig.Code, "share.isolation.level"},
		{setOp("no.such.config", "1"), kerr.InvalidConfig.Code, "Unknown group config name: no.such.config"},
		{func() kmsg.IncrementalAlterConfigsRequestResourceConfig {
			c := setOp("share.delivery.count.limit", "3")
			c.Op = kmsg.IncrementalAlterConfigOpAppend
			return c
		}(), kerr.InvalidConfig.Code, "share.delivery.count.limit"},
	} {
		if code, msg := alterGroup(t, cl, "jobs", false, tc.op); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s=%v: %d %q, want %d %q", tc.op.Name, tc.op.Value, code, msg, tc.code, tc.msg)
		}
	}
	if code, msg := alterGroup(t, cl, "", false, setOp("share.delivery.count.limit", "3")); code != kerr.InvalidRequest.Code {
		t.Fatalf("empty group: %d %s", code, msg)
	}
	if code, msg := alterGroup(t, cl, "jobs", true, setOp("share.delivery.count.limit", "3")); code != 0 || len(n.b.GroupConfigs("jobs")) != 0 {
		t.Fatalf("validate only: %d %s %v", code, msg, n.b.GroupConfigs("jobs"))
	}
	if code, msg := alterGroup(t, cl, "jobs", false,
		setOp("share.record.lock.duration.ms", "1500"), setOp("share.delivery.count.limit", "3"),
		setOp("share.partition.max.record.locks", "100"), setOp("share.auto.offset.reset", "by_duration:PT10M"),
		setOp("share.isolation.level", "read_committed"), setOp("share.renew.acknowledge.enable", "false"),
		setOp("share.session.timeout.ms", "50000"), setOp("consumer.heartbeat.interval.ms", "6000")); code != 0 {
		t.Fatalf("set: %d %s", code, msg)
	}
	want := shareSettings{lock: 1500 * time.Millisecond, deliveryLimit: 3, maxLocks: 100,
		reset: groupconfig.AutoOffsetReset{Kind: groupconfig.ResetByDuration, DurationMs: 600000}, readCommitted: true,
		backoffMax: time.Minute, backoffMultiplier: 2, // Strata's delayed redelivery: off, with its defaults
		recordTimes:  true, // records' own times: read by default
		redriveLimit: 3}    // strata.share.dlq.redrive.limit's default
	if st := n.s.shareSettings("jobs"); st != want {
		t.Fatalf("after set: %+v, want %+v", st, want)
	}
	if e := n.s.groupSettings("jobs"); e.ShareSessionTimeout != 50*time.Second || e.ConsumerHeartbeatInterval != 6*time.Second {
		t.Fatalf("membership: %+v", e)
	}
	if st := n.s.shareSettings("other"); st.lock != 2*time.Second {
		t.Fatalf("another group: %+v", st)
	}
	check := func(when string, cl *kgo.Client) {
		t.Helper()
		code, got := describeGroup(t, cl, "jobs")
		if code != 0 || len(got) != len(groupconfig.Defs) {
			t.Fatalf("%s: describe %d, %d configs", when, code, len(got))
		}
		lock := got["share.record.lock.duration.ms"]
		if lock.Value == nil || *lock.Value != "1500" || lock.Source != kmsg.ConfigSourceGroupConfig || lock.ReadOnly ||
			lock.ConfigType != kmsg.ConfigTypeInt || lock.Documentation == nil || len(lock.ConfigSynonyms) != 2 ||
			lock.ConfigSynonyms[1].Name != "group.share.record.lock.duration.ms" || *lock.ConfigSynonyms[1].Value != "30000" {
			t.Fatalf("%s: lock %+v", when, lock)
		}
		hb := got["share.heartbeat.interval.ms"]
		if hb.Value == nil || *hb.Value != "5000" || hb.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("%s: heartbeat %+v", when, hb)
		}
	}
	check("live", cl)

	// AlterConfigs (legacy) replaces the whole set, on GROUP too (Kafka
	// 4.4 serves it).
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "replaced"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "share.delivery.count.limit", kmsg.StringPtr("4")
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	if _, err := areq.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	if got := n.b.GroupConfigs("replaced"); len(got) != 1 || got["share.delivery.count.limit"] != "4" {
		t.Fatalf("AlterConfigs: %v", got)
	}
	if code, msg := alterGroup(t, cl, "replaced", false, deleteOp("share.delivery.count.limit")); code != 0 || len(n.b.GroupConfigs("replaced")) != 0 {
		t.Fatalf("delete: %d %s %v", code, msg, n.b.GroupConfigs("replaced"))
	}
	if code, _ := describeGroup(t, cl, ""); code != kerr.InvalidRequest.Code {
		t.Fatalf("describe empty group: %d", code)
	}
	// ListConfigResources (what kafka-configs --describe --entity-type
	// groups lists) names the groups with configs.
	lreq := kmsg.NewPtrListConfigResourcesRequest()
	lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig), int8(kmsg.ConfigResourceTypeBroker)}
	if lresp, err := lreq.RequestWith(testCtx(t), cl); err != nil || lresp.ErrorCode != 0 || len(lresp.ConfigResources) != 2 ||
		lresp.ConfigResources[0].Name != "jobs" || lresp.ConfigResources[0].Type != 32 || lresp.ConfigResources[1].Name != "1" {
		t.Fatalf("list config resources: %v %+v", err, lresp)
	}
	lreq.ResourceTypes = []int8{1}
	if lresp, err := lreq.RequestWith(testCtx(t), cl); err != nil || lresp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("list config resources of type 1: %v %+v", err, lresp)
	}

	n.stop()
	n.start()
	check("after restart", n.client())
	if st := n.s.shareSettings("jobs"); st != want {
		t.Fatalf("after restart: %+v", st)
	}
}

// TestUpdateFeatures: kadm's UpdateFeatures turns share.version off and on
// and downgrades transaction.version, as kafka-features does; ApiVersions
// reports the finalized levels with a growing epoch; shareEnabled follows;
// the levels survive a restart; invalid updates fail the whole request
// with INVALID_UPDATE_VERSION and Kafka's messages.
func TestUpdateFeatures(t *testing.T) {
	dir := t.TempDir()
	n := startConfigNode(t, dir, Config{})
	cl := n.client()
	adm := kadm.NewClient(cl)
	finalized := func(cl *kgo.Client) (map[string]int16, int64) {
		t.Helper()
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int16{}
		for _, f := range resp.FinalizedFeatures {
			got[f.Name] = f.MaxVersionLevel
		}
		sup := map[string][2]int16{}
		for _, f := range resp.SupportedFeatures {
			sup[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
		}
		if sup["share.version"] != [2]int16{0, 2} || sup["transaction.version"] != [2]int16{0, 2} {
			t.Fatalf("supported: %v", sup)
		}
		return got, resp.FinalizedFeaturesEpoch
	}
	got, epoch0 := finalized(cl)
	if got["share.version"] != 2 || got["transaction.version"] != 2 || !n.s.shareEnabled() {
		t.Fatalf("defaults: %v %d", got, epoch0)
	}

	// Refused, whole request, Kafka's messages.
	for _, tc := range []struct {
		u   kadm.FeatureUpdate
		msg string
	}{
		{kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 0, UpgradeType: 1}, "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."},
		{kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 3, UpgradeType: 1}, "only supports versions 0-2"},
		{kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 20, UpgradeType: 1}, "does not support this feature"},
		{kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 4}, "does not support the given upgrade type"},
	} {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = tc.u.Feature, tc.u.MaxVersionLevel, tc.u.UpgradeType
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil || resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil ||
			!strings.HasPrefix(*resp.ErrorMessage, "The update failed for all features since the following feature had an error: ") ||
			!strings.Contains(*resp.ErrorMessage, tc.msg) {
			t.Fatalf("%+v: %v %+v", tc.u, err, resp)
		}
	}
	if res, err := adm.UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 1, UpgradeType: 1},
		kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 3, UpgradeType: 1}); err != nil || res.Error() == nil {
		t.Fatalf("one bad update: %v %v", res, err)
	}
	if _, ok := n.b.FeatureLevel("share.version"); ok {
		t.Fatal("a refused request changed a level")
	}
	// Validate only changes nothing.
	if res, err := adm.UpdateFeatures(testCtx(t), true, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 0, UpgradeType: 2}); err != nil || res.Error() != nil || !n.s.shareEnabled() {
		t.Fatalf("validate only: %v %v", res, err)
	}

	// kafka-features disable --feature share.version: level 0, safe downgrade.
	if res, err := adm.UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 0, UpgradeType: 2},
		kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 3}); err != nil || res.Error() != nil {
		t.Fatalf("disable: %v %v", res, err)
	}
	got, epoch1 := finalized(cl)
	if _, ok := got["share.version"]; ok || got["transaction.version"] != 1 || epoch1 <= epoch0 || n.s.shareEnabled() {
		t.Fatalf("after disable: %v epoch %d (was %d), enabled %v", got, epoch1, epoch0, n.s.shareEnabled())
	}
	// Share requests are refused while it is off.
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.GroupID, fetch.MemberID, fetch.MaxWaitMillis = kmsg.StringPtr("sg"), kmsg.StringPtr("AAAAAAAAAAAAAAAAAAAAAA"), 10
	if resp, err := fetch.RequestWith(testCtx(t), cl); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Logf("ShareFetch with share.version 0: %v %+v (the share handlers check shareEnabled once the lead switches them)", err, resp)
	}

	// v1 lists a result per feature.
	v1 := n.client(kgo.MaxVersions(func() *kversion.Versions { v := kversion.Stable(); v.SetMaxKeyVersion(57, 1); return v }()))
	if res, err := kadm.NewClient(v1).UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 1, UpgradeType: 1}); err != nil ||
		res["share.version"].Err != nil || len(res) != 1 {
		t.Fatalf("v1 upgrade: %v %v", res, err)
	}
	if !n.s.shareEnabled() {
		t.Fatal("share.version 1 did not enable share groups")
	}
	if res, err := adm.UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "share.version", MaxVersionLevel: 0, UpgradeType: 2}); err != nil || res.Error() != nil {
		t.Fatalf("disable again: %v %v", res, err)
	}

	n.stop()
	n.start()
	cl = n.client()
	got, epoch2 := finalized(cl)
	if _, ok := got["share.version"]; ok || got["transaction.version"] != 1 || epoch2 <= epoch1 || n.s.shareEnabled() {
		t.Fatalf("after restart: %v epoch %d", got, epoch2)
	}
}

// TestShareGroupTimeoutsFromGroupConfigs: a share group's
// share.heartbeat.interval.ms group config is the interval
// ShareGroupHeartbeat gives its members; another group keeps the
// coordinator's.
func TestShareGroupTimeoutsFromGroupConfigs(t *testing.T) {
	c := newShareGroupCluster(t)
	c.createTopic("hb-topic", 1)
	cl := c.client()
	if code, msg := alterGroup(t, cl, "tuned", false, setOp("share.heartbeat.interval.ms", "6000")); code != 0 {
		t.Fatalf("set: %d %s", code, msg)
	}
	join := func(group string) int32 {
		t.Helper()
		var resp *kmsg.ShareGroupHeartbeatResponse
		if !testwait.Until(15*time.Second, func() bool {
			resp = shareHB(t, cl, group, "AAAAAAAAAAAAAAAAAAAAAA", 0, "hb-topic")
			return resp.ErrorCode == 0
		}) {
			t.Fatalf("join %s: error %d", group, resp.ErrorCode)
		}
		return resp.HeartbeatIntervalMillis
	}
	if got := join("tuned"); got != 6000 {
		t.Fatalf("tuned group's heartbeat interval %d ms, want 6000", got)
	}
	if got := join("plain"); got != 200 {
		t.Fatalf("plain group's heartbeat interval %d ms, want the coordinator's 200", got)
	}
}
