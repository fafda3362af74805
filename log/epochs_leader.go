package log

// EndOffsetForLeaderEpoch answers OffsetForLeaderEpoch on a leader whose
// current leader epoch is current. It is EndOffsetForEpoch, except that an
// epoch this log has not written in yet is taken to start at the log end:
// Kafka's leader adds its epoch to its cache (at its log end) the moment it
// becomes leader, before any batch of that epoch exists, so a client asking
// about the current epoch, or about one between the last written epoch and
// the current one, gets the log end rather than "unknown" (-1, -1), which
// kgo and the Java consumer would take as a diverged log. The cache itself
// is not changed: it stays derived from the batches. current < 0 (no
// leader epoch known) is EndOffsetForEpoch.
func (p *Partition) EndOffsetForLeaderEpoch(epoch, current int32) (leaderEpoch int32, endOffset int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := len(p.epochs)
	if epoch < 0 {
		return -1, -1
	}
	// The cache as Kafka's leader would have it: the written epochs, then
	// the current one starting at the log end if it is newer.
	at := func(i int) epochEntry { return p.epochs[i] }
	if current >= 0 && (n == 0 || p.epochs[n-1].epoch < current) {
		leo, written := p.leo, n
		at = func(i int) epochEntry {
			if i == written {
				return epochEntry{current, leo}
			}
			return p.epochs[i]
		}
		n++
	}
	if n == 0 {
		return -1, -1
	}
	if last := at(n - 1); last.epoch == epoch {
		return epoch, p.leo
	}
	// The first entry with an epoch above the requested one; the bound
	// is the cache's (maxEpochEntries).
	i := 0
	for i < n && at(i).epoch <= epoch {
		i++
	}
	switch {
	case i == n:
		return -1, -1 // above every known epoch
	case i == 0:
		// Below every known epoch: its data is gone; the first known
		// epoch's start is where the requester can resume.
		return epoch, at(0).start
	}
	return at(i - 1).epoch, at(i).start
}
