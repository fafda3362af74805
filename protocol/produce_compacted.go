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
// are opened (decompressed, bounded) to look at the keys. A partition this
// broker cannot find is left to Produce to report.
func (s *Server) checkCompactedKeys(version int16, topic string, sp *kmsg.ProduceResponseTopicPartition, records []byte) bool {
	p, err := s.broker.Partition(topic, sp.Partition)
	if err != nil || !p.Config().Cleanup.Compact {
		return true
	}
	err = segment.CheckKeys(records)
	if err == nil {
		return true
	}
	msg := "Compacted topic cannot accept message without key in topic partition " + p.TopicPartition().String() + "."
	if !errors.Is(err, segment.ErrMissingKey) {
		msg = err.Error()
		sp.ErrorCode, sp.ErrorMessage = kerr.CorruptMessage.Code, &msg
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
