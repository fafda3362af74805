package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// startServeConsole runs serve in-process with metrics.listener on a free
// port and the given extra settings; it returns the Kafka address and
// the console's base URL (http://host:port/ui/).
func startServeConsole(t *testing.T, extra ...string) (addr, ui string) {
	t.Helper()
	args := append([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--set", "metrics.listener=127.0.0.1:0"}, extra...)
	cfg, _, err := loadConfig(args, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	bound := make(chan net.Addr, 1)
	cfg.Monitoring.bound = func(a net.Addr) { bound <- a }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop within 20s")
		}
	})
	for ui == "" || addr == "" {
		select {
		case a := <-bound:
			ui = "http://" + a.String() + "/ui/"
		case a := <-ready:
			addr = a.String()
		case err := <-done:
			t.Fatalf("serve failed: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("serve not ready within 20s")
		}
	}
	return addr, ui
}

// getJSON GETs url into v and returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return resp.StatusCode
}

// postJSON POSTs body as the console's page does (its header and content
// type unless bare) and decodes the answer into v.
func postJSON(t *testing.T, url string, body any, bare bool, v any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	if !bare {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Strata-Console", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if v != nil {
		json.Unmarshal(out, v)
	}
	return resp.StatusCode
}

// TestConsoleAPI drives the console's JSON API against a real broker: the
// page and its assets, the cluster, a topic with its partitions, configs
// and records (text, JSON, headers; by offset and by timestamp), a
// consumer group's lag with its history, growth and time to drain, admin
// actions (a reset planned then applied, a delete) and a share group with
// a dead letter and its reason, redriven (plan, then execute).
func TestConsoleAPI(t *testing.T) {
	requireStorage(t)
	addr, ui := startServeConsole(t, "--set", "strata.console.admin.enable=true",
		"--set", "strata.console.lag.sample.ms=1000", "--set", "strata.console.lag.history.eager=true",
		"--set", "strata.metrics.lag.window.ms=3000")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The page and its assets.
	resp, err := http.Get(ui)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<title>Strata console</title>") {
		t.Fatalf("GET /ui/: %d %q", resp.StatusCode, page)
	}
	for _, a := range []string{"app.js", "style.css"} {
		if code := getJSON(t, ui+a, nil); code != 200 {
			t.Errorf("GET /ui/%s: %d", a, code)
		}
	}

	if r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	before := time.Now().Add(-time.Second)
	for i := range 10 {
		rec := &kgo.Record{Topic: "orders", Partition: 0, Key: []byte(fmt.Sprintf("k%d", i)),
			Value:   []byte(fmt.Sprintf(`{"order":%d,"item":"book"}`, i)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("test")}}}
		if i == 9 {
			rec.Value = []byte{0xff, 0x00, 0x01}
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var cluster struct {
		ClusterID  string `json:"clusterId"`
		Controller int32  `json:"controller"`
		Brokers    []struct {
			NodeID  int32 `json:"nodeId"`
			Leaders int   `json:"leaders"`
		} `json:"brokers"`
		Local map[string]float64 `json:"local"`
	}
	if code := getJSON(t, ui+"api/cluster", &cluster); code != 200 || len(cluster.Brokers) != 1 || cluster.Controller != 1 || cluster.ClusterID == "" {
		t.Fatalf("cluster: %d %+v", code, cluster)
	}
	if _, ok := cluster.Local["kafka_server_replicamanager_leadercount"]; !ok {
		t.Errorf("cluster: no Raft view of the serving broker: %v", cluster.Local)
	}

	var topics []struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
		Records    int64  `json:"records"`
	}
	getJSON(t, ui+"api/topics", &topics)
	found := false
	for _, tp := range topics {
		if tp.Name == "orders" {
			found = tp.Partitions == 2 && tp.Records == 10
		}
	}
	if !found {
		t.Errorf("topics: want orders with 2 partitions and 10 records: %+v", topics)
	}

	var topic struct {
		Partitions []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			Replicas  []int32 `json:"replicas"`
			ISR       []int32 `json:"isr"`
			End       int64   `json:"end"`
			Bytes     int64   `json:"bytes"`
		} `json:"partitions"`
		Configs []struct {
			Name   string  `json:"name"`
			Value  *string `json:"value"`
			Source string  `json:"source"`
		} `json:"configs"`
	}
	getJSON(t, ui+"api/topics/orders", &topic)
	if len(topic.Partitions) != 2 || topic.Partitions[0].End != 10 || topic.Partitions[0].Leader != 1 || len(topic.Partitions[0].ISR) != 1 || topic.Partitions[0].Bytes <= 0 {
		t.Errorf("topic partitions: %+v", topic.Partitions)
	}
	sources := map[string]string{}
	for _, c := range topic.Configs {
		sources[c.Name] = c.Source
	}
	if sources["retention.ms"] != "DYNAMIC_TOPIC_CONFIG" || sources["cleanup.policy"] != "DEFAULT_CONFIG" {
		t.Errorf("config sources: retention.ms %q, cleanup.policy %q", sources["retention.ms"], sources["cleanup.policy"])
	}
	if code := getJSON(t, ui+"api/topics/nosuch", nil); code != http.StatusNotFound {
		t.Errorf("unknown topic: %d, want 404", code)
	}

	type field struct {
		Null   bool   `json:"null"`
		Text   string `json:"text"`
		IsText bool   `json:"isText"`
		JSON   string `json:"json"`
		Hex    string `json:"hex"`
	}
	var recs struct {
		From    int64 `json:"from"`
		Records []struct {
			Offset  int64 `json:"offset"`
			Key     field `json:"key"`
			Value   field `json:"value"`
			Headers []struct {
				Key   string `json:"key"`
				Value field  `json:"value"`
			} `json:"headers"`
		} `json:"records"`
	}
	getJSON(t, ui+"api/topics/orders/records?partition=0&offset=2&limit=100", &recs)
	if len(recs.Records) != 8 || recs.Records[0].Offset != 2 || recs.Records[0].Key.Text != "k2" ||
		!strings.Contains(recs.Records[0].Value.JSON, `"order": 2`) || len(recs.Records[0].Headers) != 1 || recs.Records[0].Headers[0].Value.Text != "test" {
		t.Fatalf("records from offset 2: %+v", recs)
	}
	if last := recs.Records[7].Value; last.IsText || last.Hex != "ff0001" {
		t.Errorf("binary value: %+v", last)
	}
	getJSON(t, ui+fmt.Sprintf("api/topics/orders/records?partition=0&timestamp=%d&limit=3", before.UnixMilli()), &recs)
	if len(recs.Records) != 3 || recs.From != 0 {
		t.Errorf("records by timestamp: from %d, %d records", recs.From, len(recs.Records))
	}
	getJSON(t, ui+"api/topics/orders/records?partition=0&offset=-2", &recs)
	if len(recs.Records) != 2 || recs.From != 8 {
		t.Errorf("the last 2 records: from %d, %d records", recs.From, len(recs.Records))
	}
	if code := getJSON(t, ui+"api/topics/orders/records?partition=x", nil); code != http.StatusBadRequest {
		t.Errorf("bad partition: %d, want 400", code)
	}

	// A consumer group's lag, its history and its rates: committed at 2
	// of 10, then at 10 (drained).
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: at, LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctx, "billing", os); err != nil || r.Error() != nil {
			t.Fatalf("commit: %v %v", err, r.Error())
		}
	}
	commit(2)
	type groupT struct {
		State      string `json:"state"`
		Lag        int64  `json:"lag"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Lag       int64 `json:"lag"`
			Trend     *struct {
				Points []struct{ T, Lag int64 } `json:"points"`
				Growth *float64                 `json:"growth"`
				Drain  *float64                 `json:"drain"`
			} `json:"trend"`
		} `json:"partitions"`
	}
	var g groupT
	p0 := func() int { // the row of partition 0 (partition 1 has no commit)
		for i, p := range g.Partitions {
			if p.Partition == 0 {
				return i
			}
		}
		return -1
	}
	testwait.For(t, 30*time.Second, func() bool {
		getJSON(t, ui+"api/groups/billing", &g)
		i := p0()
		return i >= 0 && g.Partitions[i].Trend != nil && len(g.Partitions[i].Trend.Points) >= 2
	}, "billing's lag history: %+v", &g)
	if p := g.Partitions[p0()]; g.Lag != 8 || p.Lag != 8 || p.Trend.Points[len(p.Trend.Points)-1].Lag != 8 {
		t.Errorf("billing: lag %d, want 8: %+v", g.Lag, g)
	}
	commit(10)
	testwait.For(t, 30*time.Second, func() bool {
		getJSON(t, ui+"api/groups/billing", &g)
		p := g.Partitions[p0()]
		return p.Lag == 0 && p.Trend != nil && p.Trend.Growth != nil && *p.Trend.Growth < 0 && p.Trend.Drain != nil && *p.Trend.Drain == 0
	}, "billing's lag falling to 0 with a negative growth: %+v", &g)
	var groups []struct {
		Group string `json:"group"`
		Type  string `json:"type"`
		Lag   int64  `json:"lag"`
	}
	getJSON(t, ui+"api/groups", &groups)
	if len(groups) != 1 || groups[0].Group != "billing" || groups[0].Lag != 0 {
		t.Errorf("groups: %+v", groups)
	}

	// Admin: a reset planned (nothing changes), then applied.
	var act struct {
		Output string `json:"output"`
		Done   bool   `json:"done"`
		Error  string `json:"error"`
	}
	if code := postJSON(t, ui+"api/groups/billing/reset-offsets", map[string]any{"topic": "orders", "to": "earliest"}, true, &act); code != http.StatusForbidden {
		t.Errorf("reset without the console's header: %d, want 403", code)
	}
	if code := postJSON(t, ui+"api/groups/billing/reset-offsets", map[string]any{"topic": "orders", "to": "offset:4"}, false, &act); code != 200 ||
		act.Done || !strings.Contains(act.Output, "NEW-OFFSET") {
		t.Fatalf("reset plan: %d %+v", code, act)
	}
	if off, _ := adm.FetchOffsets(ctx, "billing"); off["orders"][0].At != 10 {
		t.Errorf("a plan changed the offset: %+v", off)
	}
	if code := postJSON(t, ui+"api/groups/billing/reset-offsets", map[string]any{"topic": "orders", "to": "offset:4", "execute": true}, false, &act); code != 200 || !act.Done {
		t.Fatalf("reset: %d %+v", code, act)
	}
	if off, _ := adm.FetchOffsets(ctx, "billing"); off["orders"][0].At != 4 {
		t.Errorf("reset to 4: %+v", off)
	}
	if code := postJSON(t, ui+"api/groups/billing/reset-offsets", map[string]any{"topic": "orders", "to": "sideways"}, false, &act); code != http.StatusConflict {
		t.Errorf("reset to nonsense: %d %+v", code, act)
	}
	if code := postJSON(t, ui+"api/groups/billing/delete", map[string]any{"share": false}, false, &act); code != 200 {
		t.Fatalf("delete: %d %+v", code, act)
	}
	if code := getJSON(t, ui+"api/groups/billing", nil); code == 200 {
		listed, _ := adm.ListGroups(ctx)
		if _, ok := listed["billing"]; ok {
			t.Errorf("billing still listed after delete")
		}
	}

	// A share group with a dead-letter topic: a rejected record becomes a
	// dead letter with its reason.
	for _, tp := range []struct {
		name string
		cfg  map[string]*string
	}{{"jobs", nil}, {"dlq.jobs", map[string]*string{"errors.deadletterqueue.group.enable": kadm.StringPtr("true")}}} {
		if r, err := adm.CreateTopic(ctx, 1, 1, tp.cfg, tp.name); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", tp.name, err, r.Err)
		}
	}
	alterGroupConfigs(t, ctx, cl, "workers", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.jobs",
		"errors.deadletterqueue.copy.record.enable", "true")
	for _, v := range []string{"ok", "poison", "ok2"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ClientID("worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	type shareT struct {
		State      string `json:"state"`
		DLQTopic   string `json:"dlqTopic"`
		Partitions []struct {
			Archived map[string]int64 `json:"archived"`
		} `json:"partitions"`
		DeadLetters []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
			Source  string `json:"source"`
			Value   field  `json:"value"`
		} `json:"deadLetters"`
	}
	var s shareT
	handled := 0
	testwait.For(t, 60*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sc.PollRecords(pctx, 10)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			handled++
			if string(r.Value) == "poison" {
				r.Ack(kgo.AckReject)
			} else {
				r.Ack(kgo.AckAccept)
			}
		})
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		sc.FlushAcks(fctx)
		fcancel()
		s = shareT{}
		getJSON(t, ui+"api/share-groups/workers", &s)
		return len(s.DeadLetters) == 1
	}, "a dead letter on the share group's page (%d records handled): %+v", &handled, &s)
	d := s.DeadLetters[0]
	if d.Reason != "rejected" || d.Message != "Offset rejected by client." || d.Source != "jobs[0]@1" || d.Value.Text != "poison" || s.DLQTopic != "dlq.jobs" {
		t.Errorf("dead letter: %+v", s)
	}
	// Redrive: the plan moves nothing, the confirmation re-publishes the
	// record to its source topic.
	if code := postJSON(t, ui+"api/share-groups/workers/redrive", map[string]any{"reason": "rejected"}, false, &act); code != 200 || act.Done ||
		!strings.Contains(act.Output, "Plan (nothing changed") || !strings.Contains(act.Output, "1 records") {
		t.Fatalf("redrive plan: %d %+v", code, act)
	}
	if code := postJSON(t, ui+"api/share-groups/workers/redrive", map[string]any{"reason": "rejected", "execute": true}, false, &act); code != 200 || !act.Done ||
		!strings.Contains(act.Output, "Redrove 1 records") {
		t.Fatalf("redrive: %d %+v", code, act)
	}
	// The record at 3, its transaction's commit marker at 4.
	if ends, err := adm.ListEndOffsets(ctx, "jobs"); err != nil || ends["jobs"][0].Offset != 5 {
		t.Errorf("jobs after the redrive: %v %v, want end 5", ends, err)
	}
	// The share group's lag history, as a consumer group's: the redriven
	// record is waiting (nobody polls now; its transaction's marker
	// counts in the share-partition lag until delivery skips it), and
	// the sparkline's last point is the lag the page shows.
	var sl struct {
		Partitions []struct {
			Lag   int64 `json:"lag"`
			Trend *struct {
				Points []struct{ T, Lag int64 } `json:"points"`
			} `json:"trend"`
		} `json:"partitions"`
	}
	testwait.For(t, 30*time.Second, func() bool {
		sl.Partitions = nil
		getJSON(t, ui+"api/share-groups/workers", &sl)
		if len(sl.Partitions) != 1 || sl.Partitions[0].Trend == nil {
			return false
		}
		p := sl.Partitions[0]
		return p.Lag >= 1 && len(p.Trend.Points) >= 2 && p.Trend.Points[len(p.Trend.Points)-1].Lag == p.Lag
	}, "workers' lag history ending at the lag of the redriven record: %+v", &sl)
	if code := postJSON(t, ui+"api/share-groups/workers/redrive", map[string]any{"reason": "sideways"}, false, &act); code != http.StatusConflict {
		t.Errorf("redrive of an unknown reason: %d %+v", code, act)
	}
	getJSON(t, ui+"api/groups", &groups)
	types := map[string]string{}
	for _, g := range groups {
		types[g.Group] = g.Type
	}
	if types["workers"] != "share" || types["strata-dlq-redrive.workers.rejected"] != "classic" {
		t.Errorf("groups (the share group, the redrive's progress): %+v", groups)
	}
	if code := getJSON(t, ui+"api/share-groups/nosuch", nil); code != http.StatusNotFound {
		t.Errorf("unknown share group: %d, want 404", code)
	}
	var info struct {
		Admin     bool `json:"admin"`
		AdminHere bool `json:"adminHere"`
		History   struct {
			Series int   `json:"series"`
			Bytes  int64 `json:"bytes"`
		} `json:"history"`
	}
	getJSON(t, ui+"api/info", &info)
	if !info.Admin || !info.AdminHere || info.History.Bytes <= 0 {
		t.Errorf("info: %+v", info)
	}
}

// alterGroupConfigs sets group configs (key, value pairs).
func alterGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = kv[i], kmsg.StringPtr(kv[i+1]), kmsg.IncrementalAlterConfigOpSet
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range resp.Resources {
		if rr.ErrorCode != 0 {
			t.Fatalf("group configs of %s: error %d", group, rr.ErrorCode)
		}
	}
}

// TestConsoleReadOnly: without strata.console.admin.enable the actions
// are refused and the page says read-only; strata.console.enable=false
// serves no /ui.
func TestConsoleReadOnly(t *testing.T) {
	requireStorage(t)
	_, ui := startServeConsole(t)
	var act struct {
		Error string `json:"error"`
	}
	if code := postJSON(t, ui+"api/groups/g/delete", map[string]any{}, false, &act); code != http.StatusForbidden || !strings.Contains(act.Error, "strata.console.admin.enable") {
		t.Errorf("admin action on a read-only console: %d %q", code, act.Error)
	}
	_, ui = startServeConsole(t, "--set", "strata.console.enable=false")
	if code := getJSON(t, ui, nil); code != http.StatusServiceUnavailable && code != http.StatusNotFound {
		t.Errorf("GET /ui/ with the console off: %d", code)
	}
	if _, _, err := loadConfig([]string{"--set", "strata.console.lag.sample.ms=10"}, nil, nil, io.Discard); err == nil {
		t.Error("strata.console.lag.sample.ms=10 accepted")
	}
}

// nonLoopbackIP is an IPv4 address of this host that is not loopback
// ("" when it has none).
func nonLoopbackIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// postAuth POSTs an admin request as the page does, with basic auth when
// user is not "", and returns the status, the error and the
// WWW-Authenticate header.
func postAuth(t *testing.T, url string, body any, user, pass string, page bool) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	if page {
		req.Header.Set("X-Strata-Console", "1")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Error, resp.Header.Get("WWW-Authenticate")
}

// TestConsoleAdminAuth: admin actions from an address other than
// loopback need a SCRAM user's name and password (HTTP basic auth,
// checked against the credentials `strata user` stores through
// AlterUserScramCredentials); with strata.console.admin.auth=always,
// loopback's too. The console listens on this host's non-loopback
// address, so its requests really come from off loopback.
func TestConsoleAdminAuth(t *testing.T) {
	requireStorage(t)
	ip := nonLoopbackIP()
	if ip == "" {
		t.Skip("this host has no non-loopback IPv4 address")
	}
	addr, ui := startServeConsole(t, "--set", "strata.console.admin.enable=true", "--set", "metrics.listener="+ip+":0")
	if !strings.Contains(ui, ip) {
		t.Fatalf("console at %s, want it on %s", ui, ip)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "audit"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "audit", Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "auditors", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}}); err != nil {
		t.Fatal(err)
	}

	plan := map[string]any{"topic": "audit", "to": "earliest"}
	// No credentials: 401, and a script is asked for basic auth.
	code, msg, challenge := postAuth(t, ui+"api/groups/auditors/reset-offsets", plan, "", "", false)
	if code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d %q", code, msg)
	}
	code, msg, challenge = postAuth(t, ui+"api/groups/auditors/reset-offsets", plan, "", "", true)
	if code != http.StatusUnauthorized || !strings.Contains(msg, "SCRAM user") || challenge != "" {
		t.Errorf("no credentials from the page: %d %q %q", code, msg, challenge)
	}
	req, _ := http.NewRequest(http.MethodPost, ui+"api/groups/auditors/delete", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("a script without credentials: %v %+v", err, resp)
	} else {
		resp.Body.Close()
	}
	var info struct {
		AdminHere bool   `json:"adminHere"`
		SignIn    bool   `json:"signIn"`
		Principal string `json:"principal"`
		Reason    string `json:"adminReason"`
	}
	if getJSON(t, ui+"api/info", &info); info.AdminHere || !info.SignIn {
		t.Errorf("info without credentials: %+v", info)
	}
	// A wrong password, an unknown user: refused alike.
	for _, up := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}, {"bob", "alice-secret"}} {
		if code, msg, _ := postAuth(t, ui+"api/groups/auditors/reset-offsets", plan, up[0], up[1], true); code != http.StatusUnauthorized || msg != "authentication failed: invalid credentials" {
			t.Errorf("%s with a wrong password: %d %q", up[0], code, msg)
		}
	}
	// The right ones (SHA-512 and SHA-256 users): the action runs.
	for _, up := range [][2]string{{"alice", "alice-secret"}, {"bob", "bob-secret"}} {
		if code, msg, _ := postAuth(t, ui+"api/groups/auditors/reset-offsets", plan, up[0], up[1], true); code != http.StatusOK {
			t.Errorf("%s's reset plan: %d %q", up[0], code, msg)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, ui+"api/info", nil)
	req.SetBasicAuth("alice", "alice-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if !info.AdminHere || info.Principal != "User:alice" {
		t.Errorf("info as alice: %+v", info)
	}

	// strata.console.admin.auth=always: loopback authenticates too.
	_, ui = startServeConsole(t, "--set", "strata.console.admin.enable=true", "--set", "strata.console.admin.auth=always")
	if code, msg, _ := postAuth(t, ui+"api/groups/auditors/reset-offsets", plan, "", "", true); code != http.StatusUnauthorized || !strings.Contains(msg, "strata.console.admin.auth=always") {
		t.Errorf("loopback without credentials under auth=always: %d %q", code, msg)
	}
	if _, _, err := loadConfig([]string{"--set", "strata.console.admin.auth=sometimes"}, nil, nil, io.Discard); err == nil {
		t.Error("strata.console.admin.auth=sometimes accepted")
	}
}

// TestConsoleAdminACLs: with ACLs on (authorizer.class.name), an
// authenticated user's admin action needs the Kafka ACLs its requests
// would: a reset's plan DESCRIBE of the group and the topic, its
// execution READ, a delete DELETE of the group -- decided by the broker's
// own authorizer over the bindings CreateAcls replicated. The broker's
// console runs with strata.console.admin.auth=always (so that loopback
// authenticates too); User:ANONYMOUS, the PLAINTEXT principal of the
// test's client and of the console's own client, is a super user.
func TestConsoleAdminACLs(t *testing.T) {
	requireStorage(t)
	addr, ui := startServeConsole(t, "--set", "strata.console.admin.enable=true", "--set", "strata.console.admin.auth=always",
		"--set", "authorizer.class.name="+StandardAuthorizerClass, "--set", "super.users=User:ANONYMOUS")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "ledger"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "ledger", Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "clerks", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}}); err != nil {
		t.Fatal(err)
	}
	grant := func(user string, ops ...kadm.ACLOperation) {
		t.Helper()
		b := kadm.NewACLs().Topics("ledger").Groups("clerks").Allow("User:" + user).AllowHosts("*").
			Operations(ops...).ResourcePatternType(kadm.ACLPatternLiteral)
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateAcls for %s: %v", user, r.Err)
			}
		}
	}
	grant("alice", kadm.OpRead)
	grant("bob", kadm.OpDescribe)
	reset := func(user string, execute bool) (int, string) {
		code, msg, _ := postAuth(t, ui+"api/groups/clerks/reset-offsets", map[string]any{"topic": "ledger", "to": "latest", "execute": execute}, user, user+"-secret", true)
		return code, msg
	}
	// The bindings reach the broker's image through the metadata log:
	// wait for the first allowed action.
	testwait.For(t, 10*time.Second, func() bool { code, _ := reset("bob", false); return code == http.StatusOK }, "bob's plan (DESCRIBE) allowed")
	if code, msg := reset("bob", true); code != http.StatusForbidden || msg != `GROUP_AUTHORIZATION_FAILED: User:bob may not READ GROUP "clerks"` {
		t.Errorf("bob's reset (no READ): %d %q", code, msg)
	}
	if code, msg := reset("alice", true); code != http.StatusOK {
		t.Errorf("alice's reset (READ): %d %q", code, msg)
	}
	if code, msg, _ := postAuth(t, ui+"api/groups/clerks/delete", map[string]any{}, "alice", "alice-secret", true); code != http.StatusForbidden || !strings.Contains(msg, "may not DELETE GROUP") {
		t.Errorf("alice's delete (no DELETE): %d %q", code, msg)
	}
	grant("alice", kadm.OpDelete)
	testwait.For(t, 10*time.Second, func() bool {
		code, _, _ := postAuth(t, ui+"api/groups/clerks/delete", map[string]any{}, "alice", "alice-secret", true)
		return code == http.StatusOK
	}, "alice's delete allowed once she holds DELETE")
	var info struct {
		ACLs      bool   `json:"acls"`
		Principal string `json:"principal"`
	}
	req, _ := http.NewRequest(http.MethodGet, ui+"api/info", nil)
	req.SetBasicAuth("bob", "bob-secret")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
	}
	if !info.ACLs || info.Principal != "User:bob" {
		t.Errorf("info as bob with ACLs on: %+v", info)
	}
}
