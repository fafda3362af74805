package log

// STUB: this file only fixes the method set so other packages compile while
// the storage engine is written. The storage work replaces it with the real
// implementation (partition.go, manager.go, ...) and deletes this file.

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Manager owns every partition log under one data directory.
// Safe for concurrent use.
type Manager struct{}

// OpenManager opens (creating if needed) the data directory and recovers
// every partition directory found in it (torn tails truncated).
func OpenManager(opts ManagerOptions) (*Manager, error) { panic("stub") }

// Partitions lists the partitions found on disk or opened since.
func (m *Manager) Partitions() []TopicPartition { panic("stub") }

// Open returns the partition's log, creating its directory if needed.
// Calling Open on an open partition returns it (cfg is then applied with
// SetConfig).
func (m *Manager) Open(tp TopicPartition, cfg Config) (*Partition, error) { panic("stub") }

// Get returns an open partition, or nil.
func (m *Manager) Get(tp TopicPartition) *Partition { panic("stub") }

// Delete closes the partition and removes its directory and files. Fetches
// in progress finish reading the data they already hold.
func (m *Manager) Delete(tp TopicPartition) error { panic("stub") }

// Close flushes and closes every partition.
func (m *Manager) Close() error { panic("stub") }

// Partition is one partition's log: ordered segments, offsets, producer
// state and fetch waiters. One writer at a time (Append/Commit/TruncateTo are
// serialized internally); Read, Offsets and Wait may be called from any
// goroutine.
type Partition struct{}

// Append validates the record batches in records (one or more v2 batches as
// received from the wire), checks idempotent producer sequences, assigns
// offsets from the log end, stamps leaderEpoch into each batch, and writes
// the bytes once into the active segment (records is modified in place:
// base offset, leader epoch, and for LogAppendTime the max timestamp and
// CRC). It does not advance the high watermark: call Commit.
func (p *Partition) Append(records []byte, leaderEpoch int32) (AppendResult, error) {
	panic("stub")
}

// Commit advances the high watermark to min(offset, LogEnd) and wakes
// waiting fetchers. It never moves the high watermark backwards.
func (p *Partition) Commit(offset int64) { panic("stub") }

// TruncateTo removes every batch at or above offset (which must be above
// the high watermark, or equal to it) and rebuilds producer state.
func (p *Partition) TruncateTo(offset int64) error { panic("stub") }

// Read returns whole batches starting with the batch containing offset, up
// to maxBytes but always at least one whole batch when offset is below the
// high watermark, never including anything at or above the high watermark.
// ErrOffsetOutOfRange when offset < LogStart or offset > HighWatermark.
func (p *Partition) Read(offset int64, maxBytes int32) (ReadResult, error) { panic("stub") }

// Offsets returns the partition's current offsets.
func (p *Partition) Offsets() Offsets { panic("stub") }

// OffsetForTimestamp returns the first offset whose batch has a timestamp
// >= ts, with that timestamp, using the time index. found is false when no
// committed record is that late.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool) {
	panic("stub")
}

// MaxTimestamp returns the largest timestamp committed and its offset
// (ListOffsets -3); offset -1 when the log is empty.
func (p *Partition) MaxTimestamp() (timestamp, offset int64) { panic("stub") }

// Wait returns a channel closed once the high watermark is above offset
// (or the partition is closed or deleted). Callers select on it with
// their own timeout.
func (p *Partition) Wait(offset int64) <-chan struct{} { panic("stub") }

// Producers lists the idempotent producers known to this partition.
func (p *Partition) Producers() []ProducerInfo { panic("stub") }

// SetConfig applies a new configuration to a live partition.
func (p *Partition) SetConfig(cfg Config) { panic("stub") }

// Flush fsyncs everything written so far.
func (p *Partition) Flush() error { panic("stub") }

// Close flushes and closes the partition's files.
func (p *Partition) Close() error { panic("stub") }
