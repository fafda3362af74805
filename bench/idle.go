package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Idle cost: `strata bench idle` starts a Strata cluster (strata
// dev-cluster --brokers N), creates topics totalling --partitions
// partitions at --replication-factor, waits until every partition has a
// leader and then --settle, and reads each broker process's CPU time
// (/proc/<pid>/stat) over --duration with no client traffic, and its RSS
// (VmRSS, and the peak VmHWM) at the end. With --cpuprofile-dir it then
// takes a CPU profile of one broker over the same length from its pprof
// endpoint (metrics.listener on a free port, metrics.pprof.enable).

// IdleConfig is a parsed idle command line.
type IdleConfig struct {
	Brokers           int
	Partitions        int
	Topics            int
	ReplicationFactor int
	Settle            time.Duration
	Duration          time.Duration
	StrataBin         string
	StrataSrc         string
	ProfileDir        string
	ProfileBroker     int
	Dir               string // keep the cluster's data and logs here ("" = a temporary dir, removed)
	JSON              bool
	Command           string
	// Sets are name=value settings passed to every broker (dev-cluster --set).
	Sets []string
}

// setFlags collects repeated name=value flags.
type setFlags []string

func (s *setFlags) String() string { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not name=value", v)
	}
	*s = append(*s, v)
	return nil
}

// IdleBroker is one broker's figures.
type IdleBroker struct {
	Node       int     `json:"node_id"`
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      float64 `json:"cores"` // CPU seconds / wall seconds: 0.10 = 10% of one core
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	Profile    string  `json:"profile,omitempty"`
}

// IdleReport is the result of one idle run.
type IdleReport struct {
	Command           string       `json:"command"`
	Host              string       `json:"host"`
	Started           time.Time    `json:"started"`
	Brokers           int          `json:"brokers"`
	Topics            int          `json:"topics"`
	Partitions        int          `json:"partitions"`
	ReplicationFactor int          `json:"replication_factor"`
	CreateSeconds     float64      `json:"create_seconds"` // CreateTopics until every partition had a leader
	CreateCPUSeconds  float64      `json:"create_cpu_seconds"`
	SettleSeconds     float64      `json:"settle_seconds"`
	MeasuredSeconds   float64      `json:"measured_seconds"`
	PerBroker         []IdleBroker `json:"per_broker"`
}

// ParseIdleFlags parses `idle [flags]`.
func ParseIdleFlags(args []string, stderr io.Writer) (*IdleConfig, error) {
	c := &IdleConfig{}
	fs := flag.NewFlagSet("bench idle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Brokers, "brokers", 3, "brokers of the cluster (strata dev-cluster --brokers)")
	fs.IntVar(&c.Partitions, "partitions", 1000, "partitions in all, spread evenly over --topics")
	fs.IntVar(&c.Topics, "topics", 10, "topics")
	fs.IntVar(&c.ReplicationFactor, "replication-factor", 0, "replication factor of the topics (default: --brokers)")
	fs.DurationVar(&c.Settle, "settle", 20*time.Second, "wait this long after every partition has a leader before measuring (longer than the brokers' strata.idle.after.ms, 10 s by default, so that they measure idle)")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "measure CPU time over this long")
	fs.StringVar(&c.StrataBin, "strata", "", "the strata binary (default: this executable)")
	fs.StringVar(&c.StrataSrc, "build", "", "build the strata binary from this module `dir` first (go build ./cmd/strata)")
	fs.StringVar(&c.ProfileDir, "cpuprofile-dir", "", "after measuring, write a CPU profile of one broker (--duration long) to this `dir`")
	fs.IntVar(&c.ProfileBroker, "profile-broker", 1, "node id of the broker --cpuprofile-dir profiles")
	fs.StringVar(&c.Dir, "dir", "", "keep the cluster's data and broker logs in this `dir` (default: a temporary one, removed)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.Var((*setFlags)(&c.Sets), "set", "name=value setting for every broker, e.g. strata.partition.heartbeat.timeout.ms=4000 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = c.Brokers
	}
	switch {
	case c.Brokers < 1 || c.Brokers > 9:
		return nil, fmt.Errorf("%w: --brokers %d: want 1..9", ErrUsage, c.Brokers)
	case c.Topics < 1 || c.Topics > maxTopics:
		return nil, fmt.Errorf("%w: --topics %d: want 1..%d", ErrUsage, c.Topics, maxTopics)
	case c.Partitions < c.Topics || c.Partitions > maxPartitions || c.Partitions%c.Topics != 0:
		return nil, fmt.Errorf("%w: --partitions %d: want a multiple of --topics, at most %d", ErrUsage, c.Partitions, maxPartitions)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > c.Brokers:
		return nil, fmt.Errorf("%w: --replication-factor %d: want 1..%d (the brokers)", ErrUsage, c.ReplicationFactor, c.Brokers)
	case c.Settle < 0 || c.Duration < time.Second || c.Duration > time.Hour:
		return nil, fmt.Errorf("%w: --duration %v: want 1s..1h, --settle not negative", ErrUsage, c.Duration)
	case c.ProfileBroker < 1 || c.ProfileBroker > c.Brokers:
		return nil, fmt.Errorf("%w: --profile-broker %d: want 1..%d", ErrUsage, c.ProfileBroker, c.Brokers)
	}
	c.Command = "strata bench idle " + shellJoin(args)
	return c, nil
}

// Idle runs the idle measurement; progress gets a line per step.
func Idle(ctx context.Context, c *IdleConfig, progress io.Writer) (*IdleReport, error) {
	dir := c.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "strata-idle-")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	cc := &CompareConfig{StrataBin: c.StrataBin, StrataSrc: c.StrataSrc}
	if err := cc.resolveStrata(ctx, dir); err != nil {
		return nil, err
	}
	rep := &IdleReport{Command: c.Command, Started: time.Now().UTC(), Brokers: c.Brokers, Topics: c.Topics,
		Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor,
		Host: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	data := filepath.Join(dir, "data")
	var extra []string
	if c.ProfileDir != "" {
		extra = []string{"metrics.listener=127.0.0.1:0", "metrics.pprof.enable=true"}
	}
	extra = append(extra, c.Sets...)
	fmt.Fprintf(progress, "starting %d brokers (data and logs in %s)\n", c.Brokers, data)
	ch, err := startDevCluster(ctx, "strata-"+strconv.Itoa(c.Brokers), dir, filepath.Join(dir, "dev-cluster.log"),
		cc.StrataBin, data, c.Brokers, extra)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	cpu0, _ := ch.cpu()
	began := time.Now()
	topics := topicNames("idle", c.Topics)
	if err := createTopics(ctx, splitList(ch.addr), topics, c.Partitions/c.Topics, c.ReplicationFactor); err != nil {
		return rep, err
	}
	rep.CreateSeconds = time.Since(began).Seconds()
	cpu1, _ := ch.cpu()
	rep.CreateCPUSeconds = cpu1 - cpu0
	fmt.Fprintf(progress, "%d partitions at replication factor %d have leaders after %.1f s (%.1f CPU s); settling %v\n",
		c.Partitions, c.ReplicationFactor, rep.CreateSeconds, rep.CreateCPUSeconds, c.Settle)
	if err := sleepCtx(ctx, c.Settle); err != nil {
		return rep, err
	}
	rep.SettleSeconds = c.Settle.Seconds()
	pids := ch.pids()
	start := make([]float64, len(pids))
	for i, p := range pids {
		if start[i], err = ProcCPU(p); err != nil {
			return rep, err
		}
	}
	t0 := time.Now()
	fmt.Fprintf(progress, "measuring %v\n", c.Duration)
	if err := sleepCtx(ctx, c.Duration); err != nil {
		return rep, err
	}
	wall := time.Since(t0).Seconds()
	rep.MeasuredSeconds = wall
	for i, p := range pids {
		end, err := ProcCPU(p)
		if err != nil {
			return rep, err
		}
		b := IdleBroker{Node: procNodeID(p), PID: p, CPUSeconds: end - start[i]}
		b.Cores = b.CPUSeconds / wall
		if rss, err := procStatusBytes(p, "VmRSS:"); err == nil {
			b.RSSMiB = float64(rss) / MiB
		}
		if rss, err := ProcPeakRSS(p); err == nil {
			b.PeakRSSMiB = float64(rss) / MiB
		}
		rep.PerBroker = append(rep.PerBroker, b)
	}
	sort.Slice(rep.PerBroker, func(i, j int) bool { return rep.PerBroker[i].Node < rep.PerBroker[j].Node })
	if c.ProfileDir != "" {
		for i := range rep.PerBroker {
			b := &rep.PerBroker[i]
			if b.Node != c.ProfileBroker {
				continue
			}
			fmt.Fprintf(progress, "profiling broker %d for %v\n", b.Node, c.Duration)
			path, err := profileBroker(ctx, filepath.Join(data, fmt.Sprintf("broker-%d.log", b.Node)), c.ProfileDir, b.Node, c.Duration)
			if err != nil {
				return rep, err
			}
			b.Profile = path
		}
	}
	return rep, nil
}

// startDevCluster runs `strata dev-cluster --brokers n` with its data in
// data and waits until the brokers have registered; the child's members
// are the broker processes. extra settings go to every broker (--set).
func startDevCluster(ctx context.Context, name, dir, logPath, bin, data string, n int, extra []string) (*child, error) {
	port, err := freePortRun(devClusterOffsets(n)...)
	if err != nil {
		return nil, err
	}
	argv := []string{bin, "dev-cluster", "--brokers", strconv.Itoa(n), "--dir", data, "--port", strconv.Itoa(port)}
	for _, s := range extra {
		argv = append(argv, "--set", s)
	}
	ch, err := startChild(ctx, name, dir, logPath, argv)
	if err != nil {
		return nil, err
	}
	ch.nodes = n
	if err := ch.clusterReady(ctx, n); err != nil {
		ch.stop()
		return nil, fmt.Errorf("%w%s", err, brokerLogTails(data, 4))
	}
	return ch, nil
}

// brokerLogTails is the last n lines of each dev-cluster broker log in
// data, leaving out raft's per-group election chatter, for an error
// message.
func brokerLogTails(data string, n int) string {
	logs, _ := filepath.Glob(filepath.Join(data, "broker-*.log"))
	var b strings.Builder
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			continue
		}
		var tail []string
		sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "component=raft ") {
				continue
			}
			if len(line) > 300 {
				line = line[:300]
			}
			tail = append(tail, line)
			if len(tail) > n {
				tail = tail[1:]
			}
		}
		f.Close()
		fmt.Fprintf(&b, "\n%s:\n  %s", filepath.Base(l), strings.Join(tail, "\n  "))
	}
	return b.String()
}

// devClusterOffsets are the ports dev-cluster takes from its base: Kafka
// listeners port..port+n-1, replication listeners 100 up.
func devClusterOffsets(n int) []int {
	var offs []int
	for i := 0; i < n; i++ {
		offs = append(offs, i, 100+i)
	}
	return offs
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrRun, ctx.Err())
	}
}

// procStatusBytes reads a kB field of /proc/<pid>/status in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	return parseStatusKB(b, field)
}

// procNodeID finds node.id=N in a broker's command line (dev-cluster
// passes it with --set); 0 if absent.
func procNodeID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	return nodeIDArg(strings.Split(string(b), "\x00"))
}

func nodeIDArg(args []string) int {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "node.id="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// profileBroker finds the broker's metrics listener in its log ("metrics
// listener up" addr=...) and saves a CPU profile of d from its pprof
// endpoint into dir.
func profileBroker(ctx context.Context, logPath, dir string, node int, d time.Duration) (string, error) {
	addr, err := metricsAddr(logPath)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
	rctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRun, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: profile: %v", ErrRun, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: profile: %s", ErrRun, resp.Status)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrRun, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("idle-broker-%d.pprof", node))
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRun, err)
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return "", fmt.Errorf("%w: profile: %v", ErrRun, err)
	}
	return path, f.Close()
}

// metricsAddr reads the "metrics listener up" line's addr from a broker
// log (the first 16 MiB).
func metricsAddr(logPath string) (string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if a, ok := metricsAddrLine(sc.Text()); ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: no metrics listener in %s", ErrRun, logPath)
}

func metricsAddrLine(line string) (string, bool) {
	if !strings.Contains(line, "metrics listener up") {
		return "", false
	}
	for _, f := range strings.Fields(line) {
		if a, ok := strings.CutPrefix(f, "addr="); ok {
			return strings.Trim(a, `"`), true
		}
	}
	return "", false
}

// Markdown renders an idle report as a table.
func (r *IdleReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`  \nHost: %s\n\n", r.Command, r.Host)
	fmt.Fprintf(&b, "%d brokers, %d topics, %d partitions at replication factor %d (%d replicas in all); "+
		"leaders after %.1f s (%.1f CPU s in all); settled %.0f s, measured %.1f s with no traffic\n\n",
		r.Brokers, r.Topics, r.Partitions, r.ReplicationFactor, r.Partitions*r.ReplicationFactor,
		r.CreateSeconds, r.CreateCPUSeconds, r.SettleSeconds, r.MeasuredSeconds)
	b.WriteString("| broker | CPU s | % of one core | RSS MiB | peak RSS MiB |\n|---|---:|---:|---:|---:|\n")
	for _, p := range r.PerBroker {
		fmt.Fprintf(&b, "| %d | %.2f | %.1f%% | %.0f | %.0f |\n", p.Node, p.CPUSeconds, 100*p.Cores, p.RSSMiB, p.PeakRSSMiB)
	}
	for _, p := range r.PerBroker {
		if p.Profile != "" {
			fmt.Fprintf(&b, "\nCPU profile of broker %d: %s (go tool pprof -top %s)\n", p.Node, p.Profile, p.Profile)
		}
	}
	return b.String()
}

func idleCLI(ctx context.Context, c *IdleConfig, stdout, stderr io.Writer) error {
	rep, err := Idle(ctx, c, stderr)
	if rep == nil {
		return err
	}
	if c.JSON {
		js, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr != nil {
			return fmt.Errorf("%w: json: %v", ErrRun, jerr)
		}
		fmt.Fprintln(stdout, string(js))
	} else if err == nil {
		fmt.Fprint(stdout, rep.Markdown())
	}
	return err
}
