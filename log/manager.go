package log

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/segment"
)

// Background work intervals (defaults for the ManagerOptions fields).
const (
	defaultFlushCheckInterval = 200 * time.Millisecond
	defaultCheckpointInterval = 5 * time.Second // replica.high.watermark.checkpoint.interval.ms
	maxTopicNameLen           = 249
)

// ErrInvalidName is returned for a topic name that cannot be a directory
// name (Kafka's legal characters are [a-zA-Z0-9._-], at most 249).
var ErrInvalidName = errors.New("log: invalid topic or partition name")

// Manager owns every partition log under one data directory.
// Safe for concurrent use.
type Manager struct {
	dir    string
	fs     segment.FS
	logger *slog.Logger
	now    func() time.Time
	opts   ManagerOptions

	// adminMu orders creating partitions (shared: distinct partitions
	// are created side by side, their fsyncs overlapping) against deleting
	// and closing them (exclusive); their disk I/O happens under it, not
	// under mu. Lock order: adminMu, ckMu, mu, then Partition.mu, then
	// Partition.waiters.mu.
	adminMu sync.RWMutex
	mu      sync.RWMutex
	parts   map[TopicPartition]*Partition // protected by mu
	// opening holds the partitions being created, each closed when its
	// Open ends, so that two Opens of one partition create it once.
	opening map[TopicPartition]chan struct{} // protected by mu
	closed  bool                             // protected by mu

	ckMu       sync.Mutex               // serializes checkpoint writes
	ckHW       map[TopicPartition]int64 // last written; protected by ckMu
	ckStarts   map[TopicPartition]int64 // last written; protected by ckMu
	ckRecovery map[TopicPartition]int64 // last written; protected by ckMu
	ckCleaner  map[TopicPartition]int64 // last written; protected by ckMu

	stop chan struct{}
	done chan struct{}
}

// validTopic reports a topic name that is safe as a directory name.
func validTopic(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > maxTopicNameLen {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseDirName splits "<topic>-<partition>" at the LAST '-' (topics may
// contain '-').
func parseDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	tp := TopicPartition{Topic: name[:i], Partition: int32(n)}
	if !validTopic(tp.Topic) {
		return TopicPartition{}, false
	}
	return tp, true
}

// OpenManager opens (creating if needed) the data directory and recovers
// every partition directory found in it (torn tails truncated).
func OpenManager(opts ManagerOptions) (*Manager, error) {
	m := &Manager{dir: filepath.Clean(opts.Dir), fs: opts.FS, logger: opts.Logger, now: opts.Now, opts: opts,
		parts: map[TopicPartition]*Partition{}, opening: map[TopicPartition]chan struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: no data directory", ErrStorage)
	}
	if m.fs == nil {
		m.fs = segment.OSFS{}
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.opts.FlushCheckInterval <= 0 {
		m.opts.FlushCheckInterval = defaultFlushCheckInterval
	}
	if m.opts.CheckpointInterval <= 0 {
		m.opts.CheckpointInterval = defaultCheckpointInterval
	}
	if err := m.fs.MkdirAll(m.dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := m.fs.SyncDir(filepath.Dir(m.dir)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	hws, err := readCheckpoint(m.fs, filepath.Join(m.dir, hwCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring unreadable checkpoint", "err", err)
	}
	cleaned, err := readCheckpoint(m.fs, filepath.Join(m.dir, cleanerCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring unreadable checkpoint", "err", err)
	}
	starts, err := readCheckpoint(m.fs, filepath.Join(m.dir, logStartCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring unreadable checkpoint", "err", err)
	}
	rps, err := readCheckpoint(m.fs, filepath.Join(m.dir, recoveryCheckpointFile))
	if err != nil {
		m.logger.Warn("ignoring unreadable checkpoint", "err", err)
	}
	ents, err := m.fs.ReadDir(m.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	for _, e := range ents {
		if !e.IsDir {
			continue
		}
		tp, ok := parseDirName(e.Name)
		if !ok {
			continue
		}
		st := partitionState{logStart: -1, hw: -1, recovery: -1, cleaner: -1}
		if v, ok := cleaned[tp]; ok {
			st.cleaner = v
		}
		if v, ok := rps[tp]; ok {
			st.recovery = v
		}
		if v, ok := starts[tp]; ok {
			st.logStart = v
		}
		if m.opts.UseHighWatermarkCheckpoint {
			// Not checkpointed yet (created less than a checkpoint
			// interval before a crash): nothing is known committed, so
			// the high watermark starts at the log start, not the end.
			st.hw = 0
			if v, ok := hws[tp]; ok {
				st.hw = v
			}
		}
		p, err := openPartition(m.fs, filepath.Join(m.dir, e.Name), tp, m.opts.DefaultConfig, st, m.logger, m.now)
		if err != nil {
			m.closeAll()
			return nil, err
		}
		m.parts[tp] = p
	}
	go m.background()
	return m, nil
}

// Partitions lists the partitions found on disk or opened since.
func (m *Manager) Partitions() []TopicPartition {
	m.mu.RLock()
	out := make([]TopicPartition, 0, len(m.parts))
	for tp := range m.parts {
		out = append(out, tp)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Open returns the partition's log, creating its directory if needed.
// Calling Open on an open partition returns it (cfg is then applied with
// SetConfig). Creating one does its I/O under adminMu (shared) only, so
// Get and Partitions are never blocked behind a disk, and distinct
// partitions are created concurrently (a topic's partitions open side by
// side: each is a handful of fsyncs).
func (m *Manager) Open(tp TopicPartition, cfg Config) (*Partition, error) {
	if !validTopic(tp.Topic) || tp.Partition < 0 {
		return nil, fmt.Errorf("%w: %q %d", ErrInvalidName, tp.Topic, tp.Partition)
	}
	if p, err := m.lookup(tp); p != nil || err != nil {
		if p != nil {
			p.SetConfig(cfg)
		}
		return p, err
	}
	m.adminMu.RLock()
	defer m.adminMu.RUnlock()
	var done chan struct{}
	for done == nil {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if p := m.parts[tp]; p != nil {
			m.mu.Unlock()
			p.SetConfig(cfg)
			return p, nil
		}
		if other, ok := m.opening[tp]; ok {
			m.mu.Unlock()
			<-other // the same partition being created: wait, then look again
			continue
		}
		done = make(chan struct{})
		m.opening[tp] = done
		m.mu.Unlock()
	}
	defer func() {
		m.mu.Lock()
		delete(m.opening, tp)
		m.mu.Unlock()
		close(done)
	}()
	dir := filepath.Join(m.dir, tp.String())
	if err := m.fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := m.fs.SyncDir(m.dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p, err := openPartition(m.fs, dir, tp, cfg, partitionState{logStart: -1, hw: -1, recovery: -1, cleaner: -1}, m.logger, m.now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.parts[tp] = p
	m.mu.Unlock()
	return p, nil
}

// lookup returns an open partition, or ErrClosed once the manager is
// closed.
func (m *Manager) lookup(tp TopicPartition) (*Partition, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.parts[tp], nil
}

// Get returns an open partition, or nil.
func (m *Manager) Get(tp TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// Delete closes the partition and removes its directory and files. Fetches
// in progress finish reading the data they already hold (they hold a
// reference on the segment; on Unix an unlinked file stays readable).
func (m *Manager) Delete(tp TopicPartition) error {
	if !validTopic(tp.Topic) || tp.Partition < 0 {
		return fmt.Errorf("%w: %q %d", ErrInvalidName, tp.Topic, tp.Partition)
	}
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	p := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	var err error
	if p != nil {
		err = p.close(false)
	}
	if e := m.fs.RemoveAll(filepath.Join(m.dir, tp.String())); e != nil && err == nil {
		err = fmt.Errorf("%w: %v", ErrStorage, e)
	}
	if e := m.fs.SyncDir(m.dir); e != nil && err == nil {
		err = fmt.Errorf("%w: %v", ErrStorage, e)
	}
	return err
}

// Close flushes and closes every partition and writes the checkpoints.
func (m *Manager) Close() error {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	// Close (and so flush) first, so the checkpoints carry the final
	// recovery points.
	err := m.closeAll()
	if e := m.checkpoint(); err == nil {
		err = e
	}
	return err
}

func (m *Manager) closeAll() error {
	m.mu.RLock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.RUnlock()
	var err error
	for _, p := range parts {
		if e := p.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// Checkpoint writes the high watermark and log start checkpoints now.
func (m *Manager) Checkpoint() error { return m.checkpoint() }

func (m *Manager) checkpoint() error {
	m.ckMu.Lock()
	defer m.ckMu.Unlock()
	m.mu.RLock()
	parts := make(map[TopicPartition]*Partition, len(m.parts))
	for tp, p := range m.parts {
		parts[tp] = p
	}
	m.mu.RUnlock()
	hws := make(map[TopicPartition]int64, len(parts))
	starts := make(map[TopicPartition]int64, len(parts))
	rps := make(map[TopicPartition]int64, len(parts))
	cleaned := make(map[TopicPartition]int64)
	for tp, p := range parts {
		o := p.Offsets()
		hws[tp], starts[tp], rps[tp] = o.HighWatermark, o.LogStart, p.RecoveryPoint()
		if c := p.CleanerPoint(); c >= 0 {
			cleaned[tp] = c
		}
	}
	if !maps.Equal(cleaned, m.ckCleaner) {
		if err := writeCheckpoint(m.fs, m.dir, cleanerCheckpointFile, cleaned); err != nil {
			return err
		}
		m.ckCleaner = cleaned
	}
	if !maps.Equal(rps, m.ckRecovery) {
		if err := writeCheckpoint(m.fs, m.dir, recoveryCheckpointFile, rps); err != nil {
			return err
		}
		m.ckRecovery = rps
	}
	// Skip the fsyncs when nothing moved since the last write.
	if !maps.Equal(hws, m.ckHW) {
		if err := writeCheckpoint(m.fs, m.dir, hwCheckpointFile, hws); err != nil {
			return err
		}
		m.ckHW = hws
	}
	if !maps.Equal(starts, m.ckStarts) {
		if err := writeCheckpoint(m.fs, m.dir, logStartCheckpointFile, starts); err != nil {
			return err
		}
		m.ckStarts = starts
	}
	return nil
}

// background runs the flush.ms policy and the periodic checkpoint. One
// goroutine per manager; stops on Close.
func (m *Manager) background() {
	defer close(m.done)
	flushT := time.NewTicker(m.opts.FlushCheckInterval)
	defer flushT.Stop()
	ckT := time.NewTicker(m.opts.CheckpointInterval)
	defer ckT.Stop()
	expireEvery := m.opts.ProducerIDExpirationCheck
	if expireEvery <= 0 {
		expireEvery = 10 * time.Minute
	}
	nextExpire := m.now().Add(expireEvery)
	for {
		select {
		case <-m.stop:
			return
		case <-flushT.C:
			now := m.now()
			m.mu.RLock()
			parts := make([]*Partition, 0, len(m.parts))
			for _, p := range m.parts {
				parts = append(parts, p)
			}
			m.mu.RUnlock()
			for _, p := range parts {
				p.maybeFlush(now)
			}
		case <-ckT.C:
			if err := m.checkpoint(); err != nil {
				m.logger.Error("checkpoint failed", "err", err)
			}
			if now := m.now(); m.opts.ProducerIDExpiration > 0 && !now.Before(nextExpire) {
				nextExpire = now.Add(expireEvery)
				m.expireProducers(now)
			}
		}
	}
}

// expireProducers applies producer.id.expiration.ms to every partition.
func (m *Manager) expireProducers(now time.Time) {
	m.mu.RLock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.RUnlock()
	n := 0
	for _, p := range parts {
		n += p.ExpireProducers(now.UnixMilli(), m.opts.ProducerIDExpiration.Milliseconds())
	}
	if n > 0 {
		m.logger.Info("expired idle producers", "count", n)
	}
}

// crash stops the background goroutine and forgets the partitions without
// flushing or closing anything, as a process crash would. Tests only.
func (m *Manager) crash() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
}
