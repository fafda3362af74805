package retention

import (
	"fmt"

	"github.com/strata-io/strata/segment"
)

// RecordTimes is the offset and timestamp of every record of one stored
// batch, in order.
type RecordTimes struct {
	Offsets    []int64
	Timestamps []int64
}

// BatchRecordTimes opens the stored batch at the start of b (decompressing
// it) and returns each record's offset and timestamp: ListOffsets answers
// a timestamp query with a record, not a batch, as Kafka does
// (FileRecords.searchForTimestamp, RecordBatch.offsetOfMaxTimestamp). A
// LogAppendTime batch gives every record the batch's max timestamp.
func BatchRecordTimes(b []byte) (RecordTimes, error) {
	var rt RecordTimes
	h, err := segment.ParseHeader(b)
	if err != nil {
		return rt, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if h.Size() > int64(len(b)) {
		return rt, fmt.Errorf("%w: batch of %d bytes holds %d", ErrCorruptBatch, h.Size(), len(b))
	}
	_, recs, err := batchRecords(b[:h.Size()])
	if err != nil {
		return rt, err
	}
	rt.Offsets = make([]int64, len(recs))
	rt.Timestamps = make([]int64, len(recs))
	for i, r := range recs {
		rt.Offsets[i] = h.BaseOffset + int64(r.offsetDelta)
		rt.Timestamps[i] = h.BaseTimestamp + r.tsDelta
		if h.IsLogAppendTime() {
			rt.Timestamps[i] = h.MaxTimestamp
		}
	}
	return rt, nil
}
