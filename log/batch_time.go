package log

// FirstTimestamp returns the first timestamp (ms) of the committed batch
// holding offset: the age of the oldest record a consumer has not read,
// for the lag metrics. It reads one batch header (the offset index finds
// it), no records. ok is false when offset is at or past the high
// watermark or below the log start.
func (p *Partition) FirstTimestamp(offset int64) (ts int64, ok bool) {
	seg, _, first, _, _, unlock, err := p.locate(offset, false)
	unlock()
	if err != nil || seg == nil {
		return 0, false
	}
	seg.Release()
	return first.BaseTimestamp, true
}
