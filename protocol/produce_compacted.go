package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/segment"
)

// checkCompactedKeys refuses records without a key on a topic whose
// cleanup.policy contains compact, as Kafka does (INVALID_RECORD,
// "Compacted topic cannot accept message without key"), with a per-record
// error for Produce v8+. Only compacted topics pay for it: their batches
// are opened to look at the keys, after the checks Kafka's log makes
// first: a batch over max.message.bytes is MESSAGE_TOO_LARGE, a bad
// length or CRC CORRUPT_MESSAGE, a record count that does not match
// INVALID_RECORD; one whose records decompress past
// segment.DecompressLimit(max.message.bytes) is MESSAGE_TOO_LARGE (the
// Java producer splits its batch on it), one that does not decompress
// or parse CORRUPT_MESSAGE. Refusals other than a missing key are logged.
// A partition this broker cannot find is left to Produce to report.
func (s *Server) checkCompactedKeys(version int16, topic string, sp *kmsg.ProduceResponseTopicPartition, records []byte) bool {
	p, err := s.broker.Partition(topic, sp.Partition)
	if err != nil || !p.Config().Cleanup.Compact {
		return true
	}
	cfg := p.Config()
	err = segment.CheckKeys(records, int(cfg.MaxMessageBytes))
	if err == nil {
		return true
	}
	msg := "Compacted topic cannot accept message without key in topic partition " + p.TopicPartition().String() + "."
	if !errors.Is(err, segment.ErrMissingKey) {
		code := kerr.CorruptMessage.Code
		switch {
		case errors.Is(err, segment.ErrBatchTooLarge), errors.Is(err, segment.ErrRecordsTooLarge):
			code = kerr.MessageTooLarge.Code
		case errors.Is(err, segment.ErrInvalidRecord):
			code = kerr.InvalidRecord.Code
		case errors.Is(err, segment.ErrUnsupportedMagic):
			code = kerr.UnsupportedForMessageFormat.Code
		}
		msg = err.Error()
		sp.ErrorCode, sp.ErrorMessage = code, &msg
		s.log.Warn("produce refused", "topic", topic, "partition", sp.Partition, "bytes", len(records),
			"error", kerr.ErrorForCode(code).Error(), "err", err)
		return false
	}
	sp.ErrorCode, sp.ErrorMessage = kerr.InvalidRecord.Code, &msg
	var ke *segment.KeyError
	if version >= 8 && errors.As(err, &ke) {
		er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		er.RelativeOffset, er.ErrorMessage = ke.Index, &msg
		sp.ErrorRecords = append(sp.ErrorRecords, er)
	}
	return false
}
