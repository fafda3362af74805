package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Broker names compare knows. The ratio column is against the first broker
// given.
const (
	BrokerStrata      = "strata"       // strata serve, single node, default durability
	BrokerStrataFsync = "strata-fsync" // strata serve with log.flush.interval.messages=1
	BrokerStrata3     = "strata-3"     // three brokers on loopback (strata dev-cluster); topics at replication factor 3
	BrokerKfakeDisk   = "kfake-disk"   // franz-go kfake with a data dir
	BrokerKfakeMem    = "kfake-mem"    // franz-go kfake in memory
	BrokerNull        = "null"         // bench's null broker: the load generator's ceiling
	// The same two Strata configurations served by another strata binary
	// (--strata-base), to measure a change against the build before it in
	// one interleaved run.
	BrokerStrataBase      = "strata-base"
	BrokerStrataBaseFsync = "strata-base-fsync"
)

// DefaultBrokers is the order compare uses unless told otherwise.
var DefaultBrokers = []string{BrokerStrata, BrokerStrataFsync, BrokerKfakeDisk, BrokerKfakeMem, BrokerNull}

// ErrNotAvailable marks a broker compare cannot start here (it is skipped
// with a note, not fatal).
var ErrNotAvailable = errors.New("bench: broker not available")

// CompareConfig is a parsed compare command line.
type CompareConfig struct {
	Workloads []Workload
	Brokers   []string
	External  map[string]string // name -> bootstrap address of a broker started elsewhere (no CPU/RSS)
	Rounds    int
	StrataBin string // the strata binary: serves Strata and runs the kfake and null children
	StrataSrc string // if set, build StrataBin from this module directory first
	// StrataBaseBin serves strata-base and strata-base-fsync: another
	// strata binary (say, the previous commit's) to compare against.
	StrataBaseBin string
	OutDir        string // compare.json, compare.md, compare.png; "" = only Markdown on stdout
	// ProfileDir, if set, runs each Strata broker under a CPU profile
	// (strata bench serve-profiled) written there per workload.
	ProfileDir string
	// WorkDir, if set, holds the brokers' data dirs and logs and is kept
	// (for reading a broker's log after a surprising figure).
	WorkDir string
	Command string // the command line, recorded in the report
	Note    string // free text recorded in the report (machine load, ...)
	// ReplicationFactor per broker name, for workloads that leave it at 0:
	// --replication-factor name=N, else 3 for strata-3 and 1 for the rest.
	ReplicationFactor map[string]int
	// KafkaHeap is each Kafka JVM's heap (-Xms and -Xmx), default 1g.
	KafkaHeap string
	// Loadgen drives the workloads: LoadgenFranz (default), LoadgenKafka
	// or LoadgenKafkaShare.
	Loadgen string
}

// ParseCompareFlags parses `compare [flags] WORKLOAD_FILE...`.
func ParseCompareFlags(args []string, stderr io.Writer) (*CompareConfig, error) {
	c := &CompareConfig{External: map[string]string{}, ReplicationFactor: map[string]int{}}
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", strings.Join(DefaultBrokers, ","),
		"brokers to start, in order (the first is the ratio's base): strata, strata-fsync, strata-3, kfake-disk, kfake-mem, null, kafka, kafka-3, strata-base, strata-base-fsync")
	fs.Func("external", "also run against a running broker: `name=host:port` (repeatable; no CPU or RSS figures)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("want name=host:port")
		}
		c.External[k] = v
		return nil
	})
	fs.Func("replication-factor", "`name=N`: replication factor of the topics created on broker name (repeatable; default 3 on strata-3, else 1; a workload's replicationFactor overrides it)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		n, err := strconv.Atoi(v)
		if !ok || k == "" || err != nil || n < 1 || n > maxReplication {
			return fmt.Errorf("want name=N, N in 1..%d", maxReplication)
		}
		c.ReplicationFactor[k] = n
		return nil
	})
	fs.IntVar(&c.Rounds, "rounds", 3, "rounds: each runs every workload once against every broker, in turn")
	fs.StringVar(&c.StrataBin, "strata", "", "the strata binary (default: this executable)")
	fs.StringVar(&c.StrataSrc, "build", "", "build the strata binary from this module `dir` first (go build ./cmd/strata)")
	fs.StringVar(&c.StrataBaseBin, "strata-base", "", "another strata `binary` (say, a baseline build) serving the brokers strata-base and strata-base-fsync")
	fs.StringVar(&c.OutDir, "out", "", "write compare.json, compare.md and compare.png to this `dir`")
	fs.StringVar(&c.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of each Strata broker to this `dir`")
	fs.StringVar(&c.Note, "note", "", "a note recorded in the report")
	fs.StringVar(&c.KafkaHeap, "kafka-heap", DefaultKafkaHeap, "heap of each Kafka JVM of the brokers kafka and kafka-3 (-Xms and -Xmx)")
	fs.StringVar(&c.Loadgen, "loadgen", LoadgenFranz, "load generator: franz (franz-go, this process), kafka (kafka-producer-perf-test, kafka-consumer-perf-test) or kafka-share (consume with kafka-share-consumer-perf-test)")
	fs.StringVar(&c.WorkDir, "work-dir", "", "keep the brokers' data dirs and logs in this `dir`, new or empty (default: a temporary dir, removed at the end)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, fmt.Errorf("%w: compare needs at least one workload file", ErrUsage)
	}
	if err := checkLoadgen(c.Loadgen); err != nil {
		return nil, err
	}
	if c.Rounds < 1 || c.Rounds > 100 {
		return nil, fmt.Errorf("%w: --rounds %d: want 1..100", ErrUsage, c.Rounds)
	}
	c.Brokers = splitList(*brokers)
	seen := map[string]bool{}
	for _, b := range c.Brokers {
		switch b {
		case BrokerStrata, BrokerStrataFsync, BrokerStrata3, BrokerKfakeDisk, BrokerKfakeMem, BrokerNull, BrokerKafka, BrokerKafka3:
		case BrokerStrataBase, BrokerStrataBaseFsync:
			if c.StrataBaseBin == "" {
				return nil, fmt.Errorf("%w: broker %q needs --strata-base", ErrUsage, b)
			}
		default:
			return nil, fmt.Errorf("%w: unknown broker %q", ErrUsage, b)
		}
		if seen[b] {
			return nil, fmt.Errorf("%w: broker %q named twice", ErrUsage, b)
		}
		seen[b] = true
	}
	for name := range c.ReplicationFactor {
		if _, ext := c.External[name]; !seen[name] && !ext {
			return nil, fmt.Errorf("%w: --replication-factor names %q, which is not among the brokers", ErrUsage, name)
		}
	}
	for name := range c.External {
		if seen[name] {
			return nil, fmt.Errorf("%w: external broker %q has the name of a started one", ErrUsage, name)
		}
		c.Brokers = append(c.Brokers, name)
	}
	if len(c.Brokers) == 0 {
		return nil, fmt.Errorf("%w: no brokers", ErrUsage)
	}
	for _, path := range fs.Args() {
		w, err := readWorkloadFile(path)
		if err != nil {
			return nil, err
		}
		c.Workloads = append(c.Workloads, w)
	}
	c.Command = "strata bench compare " + shellJoin(args)
	return c, nil
}

// Report is compare's whole output (the JSON file).
type Report struct {
	Command   string           `json:"command"`
	Note      string           `json:"note,omitempty"`
	Started   time.Time        `json:"started"`
	Host      string           `json:"host"`
	Rounds    int              `json:"rounds"`
	Loadgen   string           `json:"loadgen,omitempty"`
	Workloads []WorkloadReport `json:"workloads"`
}

// WorkloadReport is one workload against every broker.
type WorkloadReport struct {
	Workload Workload       `json:"workload"`
	Figures  []string       `json:"figures"` // the figure names, in table order
	Brokers  []BrokerReport `json:"brokers"`
}

// BrokerReport is one broker's samples and their medians.
type BrokerReport struct {
	Name       string             `json:"name"`
	Skipped    string             `json:"skipped,omitempty"` // why the broker did not run
	Samples    []Sample           `json:"samples"`
	Median     map[string]float64 `json:"median"`
	Ratio      map[string]float64 `json:"ratio_to_first"`
	PeakRSSMiB float64            `json:"peak_rss_mib,omitempty"` // summed over a cluster's processes
	// ReadySeconds is start to ready: from starting the (first) broker
	// process to the first Metadata answer listing all its brokers
	// (Kafka: its JVM start, after kafka-storage format).
	ReadySeconds float64 `json:"ready_seconds,omitempty"`
	// ReplicationFactor of the topics the runs created on this broker.
	ReplicationFactor int `json:"replication_factor,omitempty"`
	// Processes is how many broker processes the CPU and RSS figures sum.
	Processes int `json:"processes,omitempty"`
}

// Sample is one run.
type Sample struct {
	Round            int                `json:"round"`
	Result           *Result            `json:"result,omitempty"`
	BrokerCPUSeconds float64            `json:"broker_cpu_seconds"`
	ClientCPUSeconds float64            `json:"client_cpu_seconds"`
	Figures          map[string]float64 `json:"figures"`
	Err              string             `json:"error,omitempty"`
}

// Figure names.
const (
	FigMBps       = "MB/s"
	FigRecs       = "records/s"
	FigP50        = "p50 ms"
	FigP99        = "p99 ms"
	FigP999       = "p99.9 ms"
	FigMax        = "max ms"
	FigFirst      = "first record ms"
	FigE2EP50     = "e2e p50 ms"
	FigE2EP99     = "e2e p99 ms"
	FigE2EP999    = "e2e p99.9 ms"
	FigE2EMax     = "e2e max ms"
	FigBrokerCPU  = "broker CPU s/GiB"
	FigClientCPU  = "client CPU s/GiB"
	FigBrokerCore = "broker cores"
)

// figureNames are the figures of a workload kind, in table order.
func figureNames(kind string) []string {
	switch kind {
	case KindShare:
		return shareFigureNames
	case KindConsume:
		return []string{FigMBps, FigRecs, FigFirst, FigBrokerCPU, FigBrokerCore, FigClientCPU}
	case KindE2E:
		return []string{FigE2EP50, FigE2EP99, FigE2EP999, FigE2EMax, FigP99, FigMBps, FigBrokerCPU, FigBrokerCore}
	}
	return []string{FigMBps, FigRecs, FigP50, FigP99, FigP999, FigMax, FigBrokerCPU, FigBrokerCore, FigClientCPU}
}

// figures derives a sample's figures; a figure that cannot be known (no
// CPU reading for an external broker) is left out.
func figures(r *Result, brokerCPU, clientCPU float64, haveCPU bool) map[string]float64 {
	f := map[string]float64{FigMBps: r.MBPerSec, FigRecs: r.RecordsPerSec}
	if l := r.ProduceLatency; l != nil {
		f[FigP50], f[FigP99], f[FigP999], f[FigMax] = l.P50Ms, l.P99Ms, l.P999, l.MaxMs
	}
	if l := r.E2ELatency; l != nil {
		f[FigE2EP50], f[FigE2EP99], f[FigE2EP999], f[FigE2EMax] = l.P50Ms, l.P99Ms, l.P999, l.MaxMs
	}
	if r.Kind == KindConsume || r.Kind == KindShare {
		f[FigFirst] = r.FirstRecordMs
	}
	if r.Share != nil {
		shareFigures(f, r.Share)
	}
	gib := float64(r.MovedBytes) / (1 << 30)
	if haveCPU && gib > 0 {
		f[FigBrokerCPU] = brokerCPU / gib
	}
	secs := r.Seconds
	if r.MeasuredSeconds > 0 {
		secs = r.MeasuredSeconds
	}
	if haveCPU && secs > 0 {
		f[FigBrokerCore] = brokerCPU / secs
	}
	if gib > 0 {
		f[FigClientCPU] = clientCPU / gib
	}
	return f
}

// summarize fills each broker's medians and their ratios to the first
// broker's (no ratio where the first has no such figure: a ratio to some
// other base would make one column mean two things).
func summarize(wr *WorkloadReport) {
	for i := range wr.Brokers {
		br := &wr.Brokers[i]
		br.Median = map[string]float64{}
		for _, name := range wr.Figures {
			var xs []float64
			for _, s := range br.Samples {
				if v, ok := s.Figures[name]; ok && s.Err == "" {
					xs = append(xs, v)
				}
			}
			if m := Median(xs); !math.IsNaN(m) {
				br.Median[name] = m
			}
		}
	}
	for i := range wr.Brokers {
		br := &wr.Brokers[i]
		br.Ratio = map[string]float64{}
		if len(wr.Brokers) == 0 {
			continue
		}
		base := wr.Brokers[0].Median
		for name, v := range br.Median {
			b, ok := base[name]
			if !ok {
				continue
			}
			if r := Ratio(v, b); !math.IsNaN(r) && !math.IsInf(r, 0) {
				br.Ratio[name] = r
			}
		}
	}
}

// child is one broker process compare started.
type child struct {
	name   string
	cmd    *exec.Cmd
	addr   string
	dir    string
	logf   *os.File
	waited chan struct{}
	// members are the processes whose CPU time and RSS are the broker's:
	// the child itself, or the brokers a dev-cluster child started.
	members []int
	// peers are the other processes of a cluster compare started node by
	// node (kafka-3): their CPU time and RSS count as this child's, and
	// they stop with it.
	peers []*child
	// started is when the (first) process was started; nodes is how many
	// brokers a Metadata answer lists once the broker is ready.
	started time.Time
	nodes   int
	readyc  <-chan string // the address from the ready line
}

func (c *child) pids() []int {
	if len(c.members) > 0 {
		return c.members
	}
	pids := []int{c.cmd.Process.Pid}
	for _, p := range c.peers {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// cpu sums the members' CPU seconds.
func (c *child) cpu() (float64, error) {
	var sum float64
	for _, p := range c.pids() {
		v, err := ProcCPU(p)
		if err != nil {
			return sum, err
		}
		sum += v
	}
	return sum, nil
}

// peakRSS sums the members' peak RSS in bytes.
func (c *child) peakRSS() (int64, error) {
	var sum int64
	for _, p := range c.pids() {
		v, err := ProcPeakRSS(p)
		if err != nil {
			return sum, err
		}
		sum += v
	}
	return sum, nil
}

// stop sends SIGTERM and waits (bounded) for exit, then SIGKILL (to its
// members too).
func (c *child) stop() {
	var peers sync.WaitGroup
	for _, p := range c.peers {
		peers.Add(1)
		go func() {
			defer peers.Done()
			p.stop()
		}()
	}
	defer peers.Wait()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.waited:
	case <-time.After(40 * time.Second):
		// A dev-cluster child gives its brokers 30 s; past that, they
		// go with it.
		c.cmd.Process.Kill()
		for _, p := range c.members {
			syscall.Kill(p, syscall.SIGKILL)
		}
		<-c.waited
	}
	c.logf.Close()
}

// startChild runs argv and waits (bounded) for its ready line: "listening
// ADDR" on stdout (bench's children) or strata's "strata ready ...
// listener=ADDR" log line on stderr. All output goes to logPath.
func startChild(ctx context.Context, name, dir, logPath string, argv []string) (*child, error) {
	c, err := startChildAsync(ctx, name, dir, logPath, argv, nil, readyAddr)
	if err != nil {
		return nil, err
	}
	if err := c.awaitReady(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// startChildAsync starts argv (with env added to the environment) and
// returns at once; ready finds the ready line and returns the address to
// use; awaitReady waits for it.
func startChildAsync(ctx context.Context, name, dir, logPath string, argv, env []string, ready func(string) (string, bool)) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), env...)
	setDeathSignal(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%w: start %s: %v", ErrBroker, name, err)
	}
	c := &child{name: name, cmd: cmd, dir: dir, logf: logf, waited: make(chan struct{}), started: started, nodes: 1}
	addrc := make(chan string, 2)
	c.readyc = addrc
	var mu sync.Mutex // one writer at a time into the log file
	var scans sync.WaitGroup
	scan := func(r io.Reader) {
		defer scans.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			fmt.Fprintln(logf, line)
			mu.Unlock()
			if a, ok := ready(line); ok {
				select {
				case addrc <- a:
				default:
				}
			}
		}
		io.Copy(io.Discard, r) // a line over 1 MiB: keep draining
	}
	scans.Add(2)
	go scan(stdout)
	go scan(stderr)
	go func() {
		scans.Wait()
		cmd.Wait()
		close(c.waited)
	}()
	return c, nil
}

// awaitReady waits (bounded) for the child's ready line and sets its
// address; a child that exits or is not ready in time is stopped.
func (c *child) awaitReady(ctx context.Context, timeout time.Duration) error {
	select {
	case c.addr = <-c.readyc:
		return nil
	case <-c.waited:
		c.logf.Close()
		return fmt.Errorf("%w: %s exited before it was ready (see %s)", ErrBroker, c.name, c.logf.Name())
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	c.stop()
	return fmt.Errorf("%w: %s not ready within %v (see %s)", ErrBroker, c.name, timeout, c.logf.Name())
}

// readyAddr finds the address in a ready line; dev-cluster's
// "bootstrap: A,B,C" gives the list.
func readyAddr(line string) (string, bool) {
	if a, ok := strings.CutPrefix(line, readyPrefix); ok {
		return strings.TrimSpace(a), true
	}
	if a, ok := strings.CutPrefix(line, "bootstrap: "); ok {
		return strings.TrimSpace(a), true
	}
	if strings.Contains(line, "strata ready") {
		for _, f := range strings.Fields(line) {
			if a, ok := strings.CutPrefix(f, "listener="); ok {
				return strings.Trim(a, `"`), true
			}
		}
	}
	return "", false
}

// startBroker starts broker name with its data under dir.
func (c *CompareConfig) startBroker(ctx context.Context, name, dir, logPath, profile string) (*child, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	serve := []string{"serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", data}
	var argv []string
	switch name {
	case BrokerStrata, BrokerStrataFsync, BrokerStrataBase, BrokerStrataBaseFsync:
		argv = []string{c.StrataBin}
		if name == BrokerStrataBase || name == BrokerStrataBaseFsync {
			argv = []string{c.StrataBaseBin}
		}
		if profile != "" {
			argv = append(argv, "bench", "serve-profiled", "--cpuprofile", profile)
		}
		argv = append(argv, serve...)
		if name == BrokerStrataFsync || name == BrokerStrataBaseFsync {
			argv = append(argv, "--set", "log.flush.interval.messages=1")
		}
	case BrokerStrata3:
		// `strata dev-cluster --brokers 3`: three `strata serve`
		// processes, all voters of the metadata quorum, Kafka listeners
		// on port..port+2 and replication listeners 100 up; it prints
		// "bootstrap: A,B,C" once every broker answers. The figures are
		// the three brokers' (their CPU and RSS summed), not dev-cluster's.
		return startDevCluster(ctx, name, dir, logPath, c.StrataBin, data, 3, nil)
	case BrokerKfakeDisk:
		argv = []string{c.StrataBin, "bench", "kfake-server", "--data-dir", data}
	case BrokerKfakeMem:
		argv = []string{c.StrataBin, "bench", "kfake-server"}
	case BrokerNull:
		argv = []string{c.StrataBin, "bench", "null-server"}
	case BrokerKafka:
		return c.startKafka(ctx, name, dir, logPath, 1)
	case BrokerKafka3:
		return c.startKafka(ctx, name, dir, logPath, 3)
	default:
		return nil, fmt.Errorf("%w: unknown broker %q", ErrUsage, name)
	}
	return startChild(ctx, name, dir, logPath, argv)
}

// resolveStrata finds or builds the strata binary.
func (c *CompareConfig) resolveStrata(ctx context.Context, tmp string) error {
	if c.StrataSrc != "" {
		bin := filepath.Join(tmp, "strata")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/strata")
		cmd.Dir = c.StrataSrc
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: go build ./cmd/strata in %s: %v\n%s", ErrBroker, c.StrataSrc, err, out)
		}
		c.StrataBin = bin
	}
	if c.StrataBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("%w: cannot find this executable: %v (give --strata)", ErrUsage, err)
		}
		c.StrataBin = exe
	}
	return nil
}

// Compare runs every workload against every broker: for each workload it
// starts the brokers (fresh data dirs), then runs Rounds rounds, each one
// run per broker in the order given (A B C A B C ...), so that a slow
// minute of a shared machine hits every broker alike; it reads each
// broker's CPU time around the measured phase and its peak RSS at the
// end, then stops them. progress gets one line per run.
func Compare(ctx context.Context, c *CompareConfig, progress io.Writer) (*Report, error) {
	tmp := c.WorkDir
	if tmp == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "strata-bench-"); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		defer os.RemoveAll(tmp)
	} else {
		// A kept dir from an earlier run would start the brokers on its
		// data: only a new or empty dir is taken.
		if ents, err := os.ReadDir(tmp); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("%w: --work-dir %s is not empty", ErrUsage, tmp)
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
	}
	if err := c.resolveStrata(ctx, tmp); err != nil {
		return nil, err
	}
	rep := &Report{Command: c.Command, Note: c.Note, Started: time.Now().UTC(), Rounds: c.Rounds, Loadgen: c.Loadgen,
		Host: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	for wi, w := range c.Workloads {
		wr := WorkloadReport{Workload: w, Figures: figureNames(w.Kind)}
		children := make([]*child, len(c.Brokers))
		stopAll := func() {
			for bi, ch := range children {
				if ch == nil {
					continue
				}
				if rss, err := ch.peakRSS(); err == nil && bi < len(wr.Brokers) {
					wr.Brokers[bi].PeakRSSMiB = float64(rss) / MiB
				}
				ch.stop()
				if c.OutDir != "" && len(ch.members) > 0 {
					// A cluster's brokers log into its data dir, which
					// is removed: keep the logs beside the others.
					keepClusterLogs(filepath.Join(ch.dir, "data"), filepath.Join(c.OutDir, "logs"), fileSafe(w.Name)+"-"+ch.name)
				}
				children[bi] = nil
			}
		}
		for bi, name := range c.Brokers {
			br := BrokerReport{Name: name, ReplicationFactor: c.replicationFactor(name)}
			if w.ReplicationFactor > 0 {
				br.ReplicationFactor = w.ReplicationFactor
			}
			if _, ext := c.External[name]; !ext {
				dir := filepath.Join(tmp, fmt.Sprintf("w%d-%s", wi, name))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					stopAll()
					return nil, fmt.Errorf("%w: %v", ErrRun, err)
				}
				profile := ""
				if c.ProfileDir != "" && isStrata(name) {
					profile, _ = filepath.Abs(filepath.Join(c.ProfileDir, fileSafe(w.Name)+"-"+name+".pprof"))
				}
				// Broker logs outlive the temporary data dirs when there
				// is an output dir, so a failed run can be looked into.
				logPath := filepath.Join(dir, name+".log")
				if c.OutDir != "" {
					logDir := filepath.Join(c.OutDir, "logs")
					if err := os.MkdirAll(logDir, 0o755); err == nil {
						logPath = filepath.Join(logDir, fileSafe(w.Name)+"-"+name+".log")
					}
				}
				ch, err := c.startBroker(ctx, name, dir, logPath, profile)
				if err != nil {
					br.Skipped = err.Error()
					fmt.Fprintf(progress, "%s: %s skipped: %v\n", w.Name, name, err)
				}
				children[bi] = ch
				if ch != nil {
					br.Processes = len(ch.pids())
					if err := probeBrokers(ctx, ch.addr, ch.nodes, clusterReadyTimeout); err == nil {
						br.ReadySeconds = time.Since(ch.started).Seconds()
					}
				}
			}
			wr.Brokers = append(wr.Brokers, br)
		}
		for round := 1; round <= c.Rounds; round++ {
			for bi, name := range c.Brokers {
				br := &wr.Brokers[bi]
				if br.Skipped != "" {
					continue
				}
				addr, ch := c.External[name], children[bi]
				if ch := children[bi]; ch != nil {
					select {
					case <-ch.waited:
						// Died: record it instead of waiting out a run's
						// timeout against a closed port.
						br.Samples = append(br.Samples, Sample{Round: round,
							Err: fmt.Sprintf("broker process exited (log: %s)", ch.logf.Name())})
						fmt.Fprintf(progress, "%s round %d %s: broker exited\n", w.Name, round, name)
						continue
					default:
					}
					addr = ch.addr
				}
				s := runSample(ctx, w, addr, ch, br.ReplicationFactor, c.Loadgen)
				s.Round = round
				br.Samples = append(br.Samples, s)
				if s.Err != "" {
					fmt.Fprintf(progress, "%s round %d %s: error: %s\n", w.Name, round, name, s.Err)
				} else {
					fmt.Fprintf(progress, "%s round %d %s: %s\n", w.Name, round, name, oneLine(w.Kind, s.Figures))
				}
				if ctx.Err() != nil {
					stopAll()
					return rep, fmt.Errorf("%w: %v", ErrRun, ctx.Err())
				}
			}
		}
		stopAll()
		summarize(&wr)
		rep.Workloads = append(rep.Workloads, wr)
	}
	return rep, nil
}

// runSample runs the workload once against addr (a comma-separated list);
// ch (nil for an external broker) is read for CPU time around the
// measured phase.
func runSample(ctx context.Context, w Workload, addr string, ch *child, rf int, loadgen string) Sample {
	self := os.Getpid()
	var b0, b1, s0, s1 float64
	var cpuErr error
	read := func(b, s *float64) {
		if ch != nil {
			v, err := ch.cpu()
			if err != nil {
				cpuErr = err
			}
			*b = v
		}
		*s, _ = ProcCPU(self)
	}
	opts := RunOptions{Bootstrap: splitList(addr), ReplicationFactor: rf,
		MeasureStart: func() { read(&b0, &s0) }, MeasureEnd: func() { read(&b1, &s1) }}
	if ch != nil {
		opts.BrokerCPU = ch.cpu
	}
	var res *Result
	var err error
	if loadgen == "" || loadgen == LoadgenFranz {
		res, err = Run(ctx, w, opts)
	} else {
		res, err = RunKafkaTool(ctx, w, opts, loadgen)
	}
	s := Sample{Result: res, BrokerCPUSeconds: b1 - b0, ClientCPUSeconds: s1 - s0}
	if res != nil {
		// A Kafka tool's JVM is a child process: its CPU time is not
		// this process's.
		s.ClientCPUSeconds += res.LoadgenCPUSeconds
	}
	if err != nil {
		s.Err = err.Error()
	}
	if res != nil {
		s.Figures = figures(res, s.BrokerCPUSeconds, s.ClientCPUSeconds, ch != nil && cpuErr == nil)
	}
	return s
}

// replicationFactor is the default replication factor of broker name's
// topics.
func (c *CompareConfig) replicationFactor(name string) int {
	if n := c.ReplicationFactor[name]; n > 0 {
		return n
	}
	if name == BrokerStrata3 || name == BrokerKafka3 {
		return 3
	}
	return 1
}

func oneLine(kind string, f map[string]float64) string {
	var parts []string
	for _, name := range figureNames(kind) {
		if v, ok := f[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", formatFig(v), name))
		}
	}
	return strings.Join(parts, ", ")
}

func formatFig(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// Markdown renders the report as tables: per workload one row per broker,
// each figure's median and, after the first broker, its ratio to the
// first.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`  \n", r.Command)
	fmt.Fprintf(&b, "Host: %s; %d rounds, medians; ratio = broker / %s.", r.Host, r.Rounds, firstBroker(r))
	if r.Loadgen != "" && r.Loadgen != LoadgenFranz {
		fmt.Fprintf(&b, " Load generator: %s.", loadgenLabel(r.Loadgen))
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "  \nNote: %s", r.Note)
	}
	b.WriteString("\n")
	for _, wr := range r.Workloads {
		w := wr.Workload
		fmt.Fprintf(&b, "\n#### %s\n\n%s\n\n", w.Name, describe(w))
		b.WriteString("| broker |")
		for _, f := range wr.Figures {
			fmt.Fprintf(&b, " %s |", f)
		}
		b.WriteString(" peak RSS MiB | start to ready s |\n|---|")
		for range wr.Figures {
			b.WriteString("---:|")
		}
		b.WriteString("---:|---:|\n")
		for i, br := range wr.Brokers {
			fmt.Fprintf(&b, "| %s |", brokerLabel(br))
			if br.Skipped != "" {
				fmt.Fprintf(&b, " skipped: %s |\n", strings.ReplaceAll(br.Skipped, "|", "/"))
				continue
			}
			for _, f := range wr.Figures {
				v, ok := br.Median[f]
				if !ok {
					b.WriteString(" - |")
					continue
				}
				if r, ok := br.Ratio[f]; ok && i > 0 {
					fmt.Fprintf(&b, " %s (%.2fx) |", formatFig(v), r)
				} else {
					fmt.Fprintf(&b, " %s |", formatFig(v))
				}
			}
			if br.PeakRSSMiB > 0 {
				fmt.Fprintf(&b, " %.0f |", br.PeakRSSMiB)
			} else {
				b.WriteString(" - |")
			}
			if br.ReadySeconds > 0 {
				fmt.Fprintf(&b, " %.2f |\n", br.ReadySeconds)
			} else {
				b.WriteString(" - |\n")
			}
		}
		for _, br := range wr.Brokers {
			for _, s := range br.Samples {
				if s.Err != "" {
					fmt.Fprintf(&b, "\n%s round %d failed: %s\n", br.Name, s.Round, s.Err)
				}
			}
		}
	}
	return b.String()
}

// brokerLabel is a broker's table name: with its replication factor when
// above 1 and its process count when more than one.
func brokerLabel(br BrokerReport) string {
	var extra []string
	if br.ReplicationFactor > 1 {
		extra = append(extra, fmt.Sprintf("RF %d", br.ReplicationFactor))
	}
	if br.Processes > 1 {
		extra = append(extra, fmt.Sprintf("%d processes", br.Processes))
	}
	if len(extra) == 0 {
		return br.Name
	}
	return br.Name + " (" + strings.Join(extra, ", ") + ")"
}

func firstBroker(r *Report) string {
	if len(r.Workloads) > 0 && len(r.Workloads[0].Brokers) > 0 {
		return r.Workloads[0].Brokers[0].Name
	}
	return "first"
}

// describe is a workload in one line.
func describe(w Workload) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d topic(s) x %d partitions, %d-byte records", w.Kind, w.Topics, w.Partitions, w.RecordSize)
	if w.NumRecords > 0 {
		fmt.Fprintf(&b, ", %d records", w.NumRecords)
	}
	if w.Duration > 0 {
		fmt.Fprintf(&b, ", %s", w.Duration)
	}
	if w.Rate > 0 {
		fmt.Fprintf(&b, ", %.0f records/s", w.Rate)
	}
	fmt.Fprintf(&b, ", acks=%s", w.Acks)
	if w.Idempotence {
		b.WriteString(", idempotent")
	}
	if w.Compression != "none" && w.Compression != "" {
		fmt.Fprintf(&b, ", %s", w.Compression)
	}
	if w.Keys > 0 {
		fmt.Fprintf(&b, ", %d keys", w.Keys)
	}
	if w.Linger > 0 {
		fmt.Fprintf(&b, ", linger %s", w.Linger)
	}
	if w.Kind == KindShare {
		fmt.Fprintf(&b, ", a classic consumer group of %d members, then a share group of %d workers accepting every record", w.ConsumersPerSubscription, w.ConsumersPerSubscription)
	} else if w.Kind != KindProduce {
		how := "on assigned partitions"
		if w.ConsumerGroups {
			how = "in consumer groups"
		}
		fmt.Fprintf(&b, ", %d subscription(s) x %d consumer(s) %s", w.Subscriptions, w.ConsumersPerSubscription, how)
	}
	return b.String()
}

func compareCLI(ctx context.Context, c *CompareConfig, stdout, stderr io.Writer) error {
	rep, err := Compare(ctx, c, stderr)
	if rep == nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprintln(stdout, md)
	if c.OutDir != "" {
		if err := os.MkdirAll(c.OutDir, 0o755); err != nil {
			return fmt.Errorf("%w: %v", ErrRun, err)
		}
		js, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr != nil {
			return fmt.Errorf("%w: json: %v", ErrRun, jerr)
		}
		png, perr := Chart(rep)
		if perr != nil {
			return fmt.Errorf("%w: chart: %v", ErrRun, perr)
		}
		for name, data := range map[string][]byte{"compare.json": js, "compare.md": []byte(md), "compare.png": png} {
			if werr := os.WriteFile(filepath.Join(c.OutDir, name), data, 0o644); werr != nil {
				return fmt.Errorf("%w: %v", ErrRun, werr)
			}
		}
		fmt.Fprintf(stderr, "wrote %s/compare.{json,md,png}\n", c.OutDir)
	}
	return err
}

// shellJoin quotes what a shell would split, so the recorded command can
// be pasted back.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// fileSafe makes a workload name usable in a file name (OMB names carry
// spaces and slashes).
func fileSafe(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "workload"
	}
	return string(b)
}

// isStrata reports a broker served by `strata serve` (either binary).
func isStrata(name string) bool {
	switch name {
	case BrokerStrata, BrokerStrataFsync, BrokerStrataBase, BrokerStrataBaseFsync:
		return true
	}
	return false
}

// keepClusterLogs copies dev-cluster's broker-N.log files from data into
// dir as prefix-broker-N.log (best effort: they only help look into a run).
func keepClusterLogs(data, dir, prefix string) {
	logs, _ := filepath.Glob(filepath.Join(data, "broker-*.log"))
	if len(logs) == 0 || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	for _, l := range logs {
		in, err := os.Open(l)
		if err != nil {
			continue
		}
		out, err := os.Create(filepath.Join(dir, prefix+"-"+filepath.Base(l)))
		if err == nil {
			io.Copy(out, in)
			out.Close()
		}
		in.Close()
	}
}
