package replication

import "context"

// writerLock is Broker.mu: a mutex whose waiters can give up. Metadata
// writers queue on it while earlier ones forward their command to the
// controller and wait for it to apply; a CreateTopics probe queued
// behind a burst of creations must answer REQUEST_TIMED_OUT when its
// request's timeout ends (as Kafka does), not wait out the whole queue
// (issue 15: probes waited 12 s and more behind 300 partitions being
// created).
type writerLock chan struct{}

func newWriterLock() writerLock { return make(writerLock, 1) }

// Lock takes the lock, waiting as long as it takes.
func (l writerLock) Lock() { l <- struct{}{} }

// Unlock releases it; it must be held.
func (l writerLock) Unlock() { <-l }

// LockCtx takes the lock unless ctx ends first.
func (l writerLock) LockCtx(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
