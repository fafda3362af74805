package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsoleBrowser drives the broker's web console (/ui, internal/console)
// in headless Chromium through the DevTools protocol (chromedp): the page
// loads with no console errors, shows a topic made here with its records,
// a consumer group's lag rising then falling, and a share group's dead
// letter with its reason, and a redrive of it done from the page (plan,
// then confirmation) -- signed in as a SCRAM user first, since the page
// is opened on this host's non-loopback address when it has one. Screenshots go to $STRATA_CONSOLE_ARTIFACTS (or
// a temporary directory), logged. It needs Debian's chromium: skipped
// without it, failed under CI=true. Bounded at 90 s.
func TestConsoleBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped under -short")
	}
	chrome := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH under CI=true (.ci/run installs Debian's chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install chromium)")
	}
	artifacts := os.Getenv("STRATA_CONSOLE_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The console on this host's non-loopback address when it has one:
	// the page's requests then come from off loopback, and the redrive
	// needs a sign-in as a SCRAM user.
	host := consoleHostIP()
	offLoopback := host != ""
	if !offLoopback {
		host = "127.0.0.1"
	}
	b := startBroker(t, "", append([]string{"--set", "metrics.listener=" + host + ":0",
		"--set", "strata.console.admin.enable=true", "--set", "strata.console.lag.sample.ms=1000",
		"--set", "strata.console.lag.history.eager=true", "--set", "strata.metrics.lag.window.ms=4000"}, shareSettings...)...)
	ui := "http://" + stabMetricsAddr(t, b) + "/ui/"
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "operator", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "operator-secret"}}); err != nil {
		t.Fatal(err)
	}

	// A topic with records, a group committed behind its end, a share
	// group with a dead-letter topic.
	for _, tp := range []struct {
		name string
		cfg  map[string]*string
	}{{"console-orders", nil}, {"console-jobs", nil},
		{"dlq.console-jobs", map[string]*string{"errors.deadletterqueue.group.enable": kadm.StringPtr("true")}}} {
		if r, err := adm.CreateTopic(ctx, 1, 1, tp.cfg, tp.name); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", tp.name, err, r.Err)
		}
	}
	produce := func(topic string, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte(fmt.Sprintf(`{"order":%d,"item":"book"}`, i)),
				Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("console-test")}}}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "console-orders", Partition: 0, At: at, LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctx, "console-billing", os); err != nil || r.Error() != nil {
			t.Fatalf("commit: %v %v", err, r.Error())
		}
	}
	produce("console-orders", 0, 5)
	commit(0)
	setGroupConfigs(t, cl, "console-workers", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.console-jobs", "errors.deadletterqueue.copy.record.enable", "true")
	for _, v := range []string{"fine", "poison", "fine too"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "console-jobs", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	worker, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ShareGroup("console-workers"), kgo.ConsumeTopics("console-jobs"), kgo.ClientID("console-worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	go func() {
		for workerCtx.Err() == nil {
			fs := worker.PollRecords(workerCtx, 10)
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "poison" {
					r.Ack(kgo.AckReject)
				} else {
					r.Ack(kgo.AckAccept)
				}
			})
			if fs.NumRecords() > 0 {
				fctx, fcancel := context.WithTimeout(workerCtx, 5*time.Second)
				worker.FlushAcks(fctx)
				fcancel()
			}
		}
	}()

	// The browser, and every console message it reports.
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 860))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chrome, err)
	}
	var mu sync.Mutex
	var problems []string
	msgs := chromedp.Console(bctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG, the whole page
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(artifacts, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	// wait polls a JavaScript predicate on the page.
	wait := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			page, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("view").innerText`))
			shot("failed")
			t.Fatalf("%s: %v; the page shows:\n%s", what, err, page)
		}
	}
	text := func(sel string) string { // JS: the innerText of sel, "" if absent
		return fmt.Sprintf(`((document.querySelector(%q) || {}).innerText || "")`, sel)
	}

	// Cluster, then topics: the page's own start.
	if err := chromedp.Do(bctx, chromedp.Navigate(ui)); err != nil {
		t.Fatal(err)
	}
	wait("the cluster view with its Raft per broker", text(`#raft tr[data-node="1"] td.state`)+` === "reachable" && `+text(`#raft tr[data-node="1"] td.role`)+`.includes("leader")`)
	shot("cluster")
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"#/topics")); err != nil {
		t.Fatal(err)
	}
	wait("console-orders in the topics", text("#topics")+`.includes("console-orders")`)
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"#/topic/console-orders")); err != nil {
		t.Fatal(err)
	}
	wait("console-orders' records", text("#recordtable")+`.includes('"order": 3') && `+text("#recordtable")+`.includes("order-4") && `+text("#recordtable")+`.includes("console-test")`)
	shot("topic")

	// The group: lag 5, rising to 15, then falling to 0 after a commit.
	lagJS := text(`#lag tr[data-tp="console-orders/0"] td.lag`)
	growthJS := text(`#lag tr[data-tp="console-orders/0"] td:nth-child(7)`)
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"#/group/console-billing")); err != nil {
		t.Fatal(err)
	}
	wait("lag 5 with a history", lagJS+` === "5" && document.querySelector('#lag svg.spark') !== null`)
	produce("console-orders", 5, 10)
	wait("lag rising to 15", lagJS+` === "15" && `+growthJS+`.startsWith("+")`)
	shot("group-rising")
	commit(15)
	wait("lag falling to 0", lagJS+` === "0" && `+growthJS+`.startsWith("-") && document.querySelector('#lag svg.spark').dataset.last === "0"`)
	shot("group-drained")

	// The share group's dead letter and its reason.
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"#/share/console-workers")); err != nil {
		t.Fatal(err)
	}
	wait("the dead letter with its reason", text("#letters")+`.includes("rejected") && `+text("#letters")+`.includes("Offset rejected by client.") && `+text("#letters")+`.includes("poison")`)
	wait("the share group's lag history", `document.querySelector('#sharelag tr[data-tp="console-jobs/0"] svg.spark') !== null`)
	shot("share-group")

	// Off loopback, the admin panel asks for a SCRAM user first: a wrong
	// password is refused on the page, the right one shows the actions.
	if offLoopback {
		signIn := func(pass string) {
			t.Helper()
			if err := chromedp.Do(bctx, chromedp.SetValue(`#signin input[name=user]`, "operator"), chromedp.SetValue(`#signin input[name=password]`, pass),
				chromedp.Click(`#signin button[type=submit]`)); err != nil {
				t.Fatal(err)
			}
		}
		wait("the sign-in form", `document.querySelector("#signin") !== null`)
		signIn("wrong")
		wait("a wrong password refused", text("#signinout")+`.includes("authentication failed")`)
		shot("share-sign-in")
		signIn("operator-secret")
		wait("signed in as User:operator", `document.querySelector("#redrive") !== null && `+text("#mode")+` === "admin as User:operator"`)
	}

	// A redrive from the page: a dry-run plan, then its confirmation; the
	// record is back in its source topic.
	if err := chromedp.Do(bctx, chromedp.Click(`#redrive button[type=submit]`)); err != nil {
		t.Fatal(err)
	}
	wait("the redrive plan", text("#redriveplan")+`.includes("Plan (nothing changed") && `+text("#redriveplan")+`.includes("1 records")`)
	shot("share-redrive-plan")
	if err := chromedp.Do(bctx, chromedp.Click(`#confirm`)); err != nil {
		t.Fatal(err)
	}
	wait("the redrive done", text("#redrivedone")+`.includes("Redrove 1 records")`)
	shot("share-redrive-done")
	// The record at 3, its transaction's commit marker at 4.
	ends, err := adm.ListEndOffsets(ctx, "console-jobs")
	if e, _ := ends.Lookup("console-jobs", 0); err != nil || e.Offset != 5 {
		t.Errorf("console-jobs after the redrive: end %d (%v), want 5", e.Offset, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the browser's console reported:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("console in Chromium: %v", time.Since(start).Round(time.Millisecond))
}

// consoleHostIP is an IPv4 address of this host that is not loopback (""
// when it has none).
func consoleHostIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
