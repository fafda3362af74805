package retention

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/log"
)

// Broker settings of the cleaner itself (not topic-config synonyms), with
// Kafka's names and defaults.
var cleanerSettings = []struct {
	name, def, doc string
	min            int64
}{
	{"log.retention.check.interval.ms", "300000", "How often the cleaner checks every partition for segments past retention.", 1},
	{"log.cleaner.backoff.ms", "15000", "How long the cleaner sleeps when no partition needs compacting.", 0},
	{"log.cleaner.enable", "true", "Run the log cleaner (compaction of cleanup.policy=compact topics).", 0},
}

// IsCleanerSetting reports whether name is a broker setting of the cleaner
// (log.retention.check.interval.ms, log.cleaner.backoff.ms,
// log.cleaner.enable).
func IsCleanerSetting(name string) bool {
	for _, s := range cleanerSettings {
		if s.name == name {
			return true
		}
	}
	return false
}

// parseCleanerSetting parses the value of cleaner setting i: a boolean
// for log.cleaner.enable, else milliseconds in [min, one year].
func parseCleanerSetting(i int, value string) (on bool, d time.Duration, err error) {
	s := cleanerSettings[i]
	v := strings.TrimSpace(value)
	if s.name == "log.cleaner.enable" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, 0, fmt.Errorf("%w: %s=%q: expected true or false", ErrInvalidValue, s.name, v)
		}
		return b, 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < s.min || n > int64(24*time.Hour/time.Millisecond)*365 {
		return false, 0, fmt.Errorf("%w: %s=%q: expected milliseconds >= %d", ErrInvalidValue, s.name, v, s.min)
	}
	return false, time.Duration(n) * time.Millisecond, nil
}

// CleanerOptionsFromProps reads the cleaner's settings from the broker's
// properties (defaults for those not set) into opts, and validates them.
func CleanerOptionsFromProps(props map[string]string, opts *CleanerOptions) error {
	for i, s := range cleanerSettings {
		v, ok := props[s.name]
		if !ok {
			v = s.def
		}
		on, d, err := parseCleanerSetting(i, v)
		if err != nil {
			return err
		}
		switch s.name {
		case "log.cleaner.enable":
			opts.CompactionDisabled = !on
		case "log.retention.check.interval.ms":
			opts.CheckInterval = d
		case "log.cleaner.backoff.ms":
			opts.Backoff = d
		}
	}
	return nil
}

// CleanerOptions configure a Cleaner.
type CleanerOptions struct {
	Logs   *log.Manager
	Logger *slog.Logger     // nil = slog.Default()
	Now    func() time.Time // nil = time.Now; the policy's clock
	// CheckInterval is log.retention.check.interval.ms (default 5 min).
	CheckInterval time.Duration
	// Backoff is log.cleaner.backoff.ms (default 15 s).
	Backoff time.Duration
	// CompactionDisabled is log.cleaner.enable=false.
	CompactionDisabled bool
	// Registerer receives the cleaner's series (metrics.go); nil = not
	// exported.
	Registerer prometheus.Registerer
}

// Cleaner is the executor of the retention policy: one goroutine that,
// every CheckInterval, asks PlanDelete what each partition of the log
// manager should lose and carries it out through log.Partition (Roll,
// AdvanceLogStart). Deleting a segment under a fetch is safe: readers
// hold a reference on the segment and its file stays open until they
// release it (log doc.go, "Reading and deletion").
//
// The cleaner acts on each replica's own log, as Kafka's retention does;
// the partition's config (log.Config.Cleanup) says what to enforce, and
// the broker keeps it current (SetConfig), so config changes apply at the
// next check without a restart.
type Cleaner struct {
	opts    CleanerOptions
	logger  *slog.Logger
	metrics *metrics

	runMu sync.Mutex // one pass at a time (the loop, RunOnce and CompactOnce callers)

	// backoff carries a new log.cleaner.backoff.ms to the loop (a dynamic
	// broker config); one pending value at most, the newest.
	backoff chan time.Duration

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// NewCleaner starts the cleaner's goroutine. Close stops it.
func NewCleaner(opts CleanerOptions) *Cleaner {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 5 * time.Minute
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 15 * time.Second
	}
	c := &Cleaner{opts: opts, logger: opts.Logger.With("component", "cleaner"), metrics: newMetrics(opts.Registerer),
		backoff: make(chan time.Duration, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *Cleaner) loop() {
	defer close(c.done)
	t := time.NewTicker(c.opts.CheckInterval)
	defer t.Stop()
	// Compaction is checked every log.cleaner.backoff.ms (Kafka's cleaner
	// threads sleep that long when no log needs cleaning).
	ct := time.NewTicker(c.opts.Backoff)
	defer ct.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.RunOnce()
		case <-ct.C:
			if !c.opts.CompactionDisabled {
				c.CompactOnce()
			}
		case d := <-c.backoff:
			ct.Reset(d)
		}
	}
}

// SetBackoff changes log.cleaner.backoff.ms on the running cleaner (a
// dynamic broker config); the next compaction check is d from now. Zero or
// negative means the default (15 s), as at start. Never blocks.
func (c *Cleaner) SetBackoff(d time.Duration) {
	if d <= 0 {
		d = 15 * time.Second
	}
	for {
		select {
		case c.backoff <- d:
			return
		default:
		}
		select {
		case <-c.backoff: // drop the older pending value
		default:
		}
	}
}

// Close stops the cleaner and waits for a pass in progress to finish.
func (c *Cleaner) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// RunOnce checks every partition once and carries out what retention
// asks. It returns the number of partitions whose log start moved or that
// lost segments. Safe to call concurrently with the loop (passes are
// serialized).
func (c *Cleaner) RunOnce() int {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	changed := 0
	for _, tp := range c.opts.Logs.Partitions() {
		select {
		case <-c.stop:
			return changed
		default:
		}
		p := c.opts.Logs.Get(tp)
		if p == nil {
			continue // found on disk but not opened by the broker
		}
		if c.enforceRetention(p) {
			changed++
		}
	}
	return changed
}

// enforceRetention runs PlanDelete on one partition and executes it.
func (c *Cleaner) enforceRetention(p *log.Partition) bool {
	removed := c.removeBelowLogStart(p)
	cfg := p.Config().Cleanup
	// Segments before Offsets: the high watermark only grows, so every
	// segment the plan sees as committed really is.
	segs := p.Segments()
	offs := p.Offsets()
	acts := PlanDelete(segs, offs, cfg, c.opts.Now().UnixMilli())
	if len(acts) == 0 {
		return removed
	}
	tp := p.TopicPartition()
	for _, a := range acts {
		switch a.Kind {
		case ActionRoll:
			if err := p.Roll(); err != nil {
				c.logger.Error("retention: roll failed", "partition", tp.String(), "err", err)
				c.metrics.retentionFailed.Inc()
				return false
			}
		case ActionDeleteBefore:
			c.makeRemovable(p, a.Offset)
			before := len(p.Segments())
			start, err := p.AdvanceLogStart(a.Offset)
			if err != nil {
				c.logger.Error("retention: delete failed", "partition", tp.String(), "offset", a.Offset, "err", err)
				c.metrics.retentionFailed.Inc()
				return false
			}
			if n := before - len(p.Segments()); n > 0 {
				c.metrics.deletedSegments.Add(float64(n))
			}
			c.logger.Info("retention: deleted segments", "partition", tp.String(),
				"segments", before-len(p.Segments()), "log_start", start, "reasons", strings.Join(a.Reasons, "; "))
		}
	}
	return true
}

// makeRemovable asks the replication layer for a snapshot when its
// removal limit (log/removal.go) holds back batches below offset.
func (c *Cleaner) makeRemovable(p *log.Partition, offset int64) {
	if offset <= p.RemovalLimit() {
		return
	}
	if err := p.RequestSnapshot(); err != nil {
		c.logger.Warn("retention: the partition's raft snapshot failed; segments stay until the next one",
			"partition", p.TopicPartition().String(), "err", err)
	}
}

// removeBelowLogStart removes segments wholly below the log start that
// the removal limit kept (DeleteRecords applied by a replica moves the log
// start without waiting for a snapshot).
func (c *Cleaner) removeBelowLogStart(p *log.Partition) bool {
	segs := p.Segments()
	start := p.LogStartOffset()
	if len(segs) < 2 || segs[1].BaseOffset > start {
		return false
	}
	c.makeRemovable(p, segs[1].BaseOffset)
	if err := p.RemoveBelowLogStart(); err != nil {
		c.logger.Error("retention: removing segments below the log start failed", "partition", p.TopicPartition().String(), "err", err)
		return false
	}
	return len(p.Segments()) < len(segs)
}

// CompactOnce compacts every partition whose cleanup.policy contains
// compact and that PlanCompact says is due. It returns the number of
// partitions compacted. Passes are serialized with RunOnce.
func (c *Cleaner) CompactOnce() int {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	n := 0
	for _, tp := range c.opts.Logs.Partitions() {
		select {
		case <-c.stop:
			return n
		default:
		}
		p := c.opts.Logs.Get(tp)
		if p == nil || !p.Config().Cleanup.Compact {
			continue
		}
		if c.compactPartition(p) {
			n++
		}
	}
	return n
}

func (c *Cleaner) compactPartition(p *log.Partition) bool {
	tp := p.TopicPartition()
	segs := p.Segments()
	offs := p.Offsets()
	now := c.opts.Now().UnixMilli()
	// The first dirty offset is the partition's, checkpointed by the log
	// manager (cleaner-offset-checkpoint), so a restart does not compact
	// a clean log again.
	firstDirty := max(p.CleanerPoint(), 0)
	acts := PlanCompact(segs, offs, p.Config().Cleanup, firstDirty, now)
	if len(acts) == 0 {
		return false
	}
	end := acts[0].Offset
	if end > p.RemovalLimit() {
		c.makeRemovable(p, end)
		// Only whole segments below the limit are rewritten.
		lim, bound := p.RemovalLimit(), int64(-1)
		for _, sg := range p.Segments() {
			if sg.BaseOffset <= lim && sg.BaseOffset <= end {
				bound = sg.BaseOffset
			}
		}
		if bound <= firstDirty {
			return false
		}
		end = bound
	}
	start := time.Now()
	st, err := compact(p, firstDirty, end, now)
	if err != nil {
		c.logger.Error("compaction failed; retried at the next check", "partition", tp.String(), "err", err)
		c.metrics.compactionFailed.Inc()
		return false
	}
	c.metrics.compactions.Inc()
	c.metrics.bytesRead.Add(float64(st.bytesIn))
	c.metrics.bytesWritten.Add(float64(st.bytesOut))
	p.SetCleanerPoint(st.end)
	c.logger.Info("compacted", "partition", tp.String(), "segments", st.segments,
		"bytes_in", st.bytesIn, "bytes_out", st.bytesOut, "records_in", st.recordsIn, "records_kept", st.recsKept,
		"first_dirty", st.end, "took", time.Since(start).Round(time.Millisecond), "why", acts[0].Reasons[0])
	return true
}
