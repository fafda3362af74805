package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// monSamples parses a /metrics body into "name{labels}" -> value.
func monSamples(body string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// monScrape scrapes the broker's /metrics (bounded by 10 s).
func monScrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := stabScrapeRaw(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	return monSamples(body)
}

// A franz-go producer faster than its group's consumer, then slower: the
// lag growth rate on /metrics turns positive, then negative (only its sign
// is checked end to end; internal/lagrate checks the values on an injected
// clock). The lag window is 2 s here so the sign follows within seconds.
func TestLagGrowthSignFollowsProducerAndConsumer(t *testing.T) {
	b := startBroker(t, "", "--set", "metrics.listener=127.0.0.1:0",
		"--set", "strata.metrics.lag.window.ms=2000", "--set", "group.initial.rebalance.delay.ms=0")
	mon := stabMetricsAddr(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "lagsign"); err != nil {
		t.Fatal(err)
	}

	// The producer's pace (records per 10 ms tick) is changed by the test.
	var perTick sync.Mutex
	rate := 4 // 400 records/s
	prod := b.client(kgo.DefaultProduceTopic("lagsign"), kgo.ProducerLinger(0))
	var wg sync.WaitGroup
	pctx, pstop := context.WithCancel(ctx)
	defer func() { pstop(); wg.Wait() }()
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for pctx.Err() == nil {
			select {
			case <-tick.C:
			case <-pctx.Done():
				return
			}
			perTick.Lock()
			k := rate
			perTick.Unlock()
			for i := 0; i < k; i++ {
				n++
				prod.Produce(pctx, &kgo.Record{Value: []byte(strconv.Itoa(n))}, nil)
			}
		}
	}()
	// The consumer takes one record per 10 ms tick (100/s) and commits
	// what it took after every poll.
	cons := b.client(kgo.ConsumeTopics("lagsign"), kgo.ConsumerGroup("lagsign-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for pctx.Err() == nil {
			recs := cons.PollRecords(pctx, 20).Records()
			for range recs {
				select {
				case <-tick.C:
				case <-pctx.Done():
					return
				}
			}
			if len(recs) > 0 {
				cons.CommitRecords(pctx, recs...)
			}
		}
	}()

	series := `strata_consumergroup_lag_growth_rate{group="lagsign-g",partition="0",topic="lagsign"}`
	topicSeries := `strata_consumergroup_topic_lag_growth_rate{group="lagsign-g",topic="lagsign"}`
	waitSign := func(phase string, want func(float64) bool) {
		t.Helper()
		var last map[string]float64
		if testwait.UntilEvery(30*time.Second, 200*time.Millisecond, func() bool { // the scrape interval
			last = monScrape(t, mon)
			v, ok := last[series]
			tv, tok := last[topicSeries]
			return ok && want(v) && tok && want(tv)
		}) {
			t.Logf("%s: growth %.1f records/s, lag %v, time to drain %v", phase, last[series],
				last[`kafka_consumergroup_lag{group="lagsign-g",partition="0",topic="lagsign"}`],
				last[`strata_consumergroup_time_to_drain_seconds{group="lagsign-g",partition="0",topic="lagsign"}`])
			return
		}
		t.Fatalf("%s: %s never had the expected sign within 30 s (last %v, present %v)", phase, series, last[series], hasKey(last, series))
	}
	waitSign("producer faster", func(v float64) bool { return v > 0 })
	perTick.Lock()
	rate = 0 // then slower: nothing produced, the consumer catches up
	perTick.Unlock()
	waitSign("producer slower", func(v float64) bool { return v < 0 })
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// metricNameRE finds the names of Strata's series in PromQL expressions.
var metricNameRE = regexp.MustCompile(`\b(?:kafka|strata|go|process)_[a-zA-Z0-9_:]*`)

// The alert rules parse with promtool, and every metric name in them and
// in the Grafana dashboard is on a real broker's /metrics once it has a
// topic, a consumer group and a share group (only `up`, which Prometheus
// records itself, is not).
func TestMonitoringAssets(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	rulesPath := filepath.Join(root, "deploy", "prometheus", "strata-alerts.yml")
	dashPath := filepath.Join(root, "deploy", "grafana", "strata.json")

	used := map[string][]string{} // metric name -> where
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			for _, n := range metricNameRE.FindAllString(e, -1) {
				used[n] = append(used[n], "strata-alerts.yml")
			}
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	raw, err := os.ReadFile(dashPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricNameRE.FindAllString(tg.Expr, -1) {
				used[n] = append(used[n], "strata.json: "+p.Title)
			}
		}
	}
	for _, v := range dash.Templating.List {
		for _, n := range metricNameRE.FindAllString(v.Definition, -1) {
			used[n] = append(used[n], "strata.json: variables")
		}
	}
	if len(used) < 20 {
		t.Fatalf("only %d metric names found in the rules and the dashboard", len(used))
	}

	t.Run("promtool", func(t *testing.T) {
		promtool := needTool(t, "promtool")
		out, err := exec.Command(promtool, "check", "rules", rulesPath).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool check rules: %v\n%s", err, out)
		}
		t.Logf("%s", out)
	})

	t.Run("names on a real broker", func(t *testing.T) {
		b := startBroker(t, "", "--set", "metrics.listener=127.0.0.1:0", "--set", "group.initial.rebalance.delay.ms=0",
			"--set", "strata.share.dlq.depth.interval.ms=1000")
		mon := stabMetricsAddr(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		admCl := b.client()
		adm := kadm.NewClient(admCl)
		for _, topic := range []string{"mon-stream", "mon-queue"} {
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			produceSeq(t, b.client(), topic, 10)
		}
		// A consumer group that consumed and committed.
		cons := b.client(kgo.ConsumeTopics("mon-stream"), kgo.ConsumerGroup("mon-group"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		for got := 0; got < 10; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumer group read %d of 10", got)
			}
			got += fs.NumRecords()
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// A share group that took records.
		// ... with a dead-letter topic (its depth series).
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"errors.deadletterqueue.group.enable": kadm.StringPtr("true")}, "dlq.mon"); err != nil {
			t.Fatal(err)
		}
		setGroupConfigs(t, admCl, "mon-share", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.mon")
		// A share group the flood guard paused (its pause series).
		setGroupConfigs(t, admCl, "mon-paused", "strata.share.dlq.flood.paused", "true")
		sh := b.client(kgo.ShareGroup("mon-share"), kgo.ConsumeTopics("mon-queue"))
		for got := 0; got == 0; {
			fs := sh.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("the share group got no records")
			}
			got += fs.NumRecords()
		}

		// Scrape until every name is there: the rates need two scrapes.
		var missing []string
		var samples map[string]float64
		testwait.UntilEvery(30*time.Second, 250*time.Millisecond, func() bool { // the scrape interval
			names := map[string]bool{}
			samples = monScrape(t, mon)
			for k := range samples {
				if i := strings.IndexByte(k, '{'); i >= 0 {
					k = k[:i]
				}
				names[k] = true
			}
			missing = missing[:0]
			for n, where := range used {
				if !names[n] {
					missing = append(missing, n+" (in "+strings.Join(where, ", ")+")")
				}
			}
			return len(missing) == 0
		})
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("not on the broker's /metrics: %s", m)
		}
		// The per-topic counters count what the clients did: 10 records
		// produced to each topic, and the group read all of mon-stream.
		for _, topic := range []string{"mon-stream", "mon-queue"} {
			if v := samples[`kafka_server_brokertopicmetrics_messagesin_total{topic="`+topic+`"}`]; v != 10 {
				t.Errorf("records in of %s: %v, want 10", topic, v)
			}
			if v := samples[`kafka_server_brokertopicmetrics_bytesin_total{topic="`+topic+`"}`]; v < 10 {
				t.Errorf("bytes in of %s: %v", topic, v)
			}
		}
		if v := samples[`strata_topic_records_out_total{topic="mon-stream"}`]; v < 10 {
			t.Errorf("records out of mon-stream: %v, want >= 10", v)
		}
		if v := samples[`kafka_server_brokertopicmetrics_bytesout_total{topic="mon-stream"}`]; v < samples[`kafka_server_brokertopicmetrics_bytesin_total{topic="mon-stream"}`] {
			t.Errorf("bytes out of mon-stream %v < bytes in", v)
		}
		t.Logf("%d metric names of the rules and the dashboard checked", len(used))
	})
}
