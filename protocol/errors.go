package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// Errors of this package (logged; clients see Kafka codes or a closed
// connection).
var (
	ErrFrameTooLarge      = errors.New("protocol: request frame too large")
	ErrFrameNegative      = errors.New("protocol: negative request frame size")
	ErrShortHeader        = errors.New("protocol: request header truncated")
	ErrUnknownKey         = errors.New("protocol: unknown api key")
	ErrUnsupportedVersion = errors.New("protocol: unsupported api version")
	ErrDecode             = errors.New("protocol: request does not parse")
	ErrHandlerPanic       = errors.New("protocol: handler panicked")
	ErrServerClosed       = errors.New("protocol: server closed")
	ErrAcksZeroFailed     = errors.New("protocol: acks=0 produce failed")
)

// errorCodes is the one table from internal sentinel errors to Kafka error
// codes. Order matters only where one error wraps another; the first match
// wins.
var errorCodes = []struct {
	err  error
	code int16
}{
	{replication.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Code},
	{replication.ErrUnknownTopicID, kerr.UnknownTopicID.Code},
	{replication.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{replication.ErrInvalidTopic, kerr.InvalidTopicException.Code},
	{replication.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{replication.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor.Code},
	{replication.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment.Code},
	{replication.ErrInvalidConfig, kerr.InvalidConfig.Code},
	{replication.ErrReadOnlyConfig, kerr.InvalidRequest.Code},
	{replication.ErrInvalidBrokerResource, kerr.InvalidRequest.Code},
	{replication.ErrNotLeader, kerr.NotLeaderForPartition.Code},
	{replication.ErrNotController, kerr.NotController.Code},
	{replication.ErrTopicDeletionDisabled, kerr.TopicDeletionDisabled.Code},
	{replication.ErrPolicyViolation, kerr.PolicyViolation.Code},
	{replication.ErrElectionNotNeeded, kerr.ElectionNotNeeded.Code},
	{replication.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable.Code},
	{replication.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable.Code},
	{replication.ErrInvalidElectionType, kerr.InvalidRequest.Code},
	{replication.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress.Code},
	// Something stopped under the request: this broker is closing, the
	// partition's Raft group was stopped (the replica moved away, the
	// topic was deleted), or the controller a metadata request was
	// forwarded to is stopping (its answer carries the sentinel). Another
	// broker, or a later attempt, can serve it: a retriable code that makes
	// clients refresh their metadata and retry.
	{replication.ErrShuttingDown, kerr.NotLeaderForPartition.Code},

	{log.ErrClosed, kerr.NotLeaderForPartition.Code},
	{log.ErrCorruptBatch, kerr.CorruptMessage.Code},
	{log.ErrInvalidRecord, kerr.InvalidRecord.Code},
	{log.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat.Code},
	{log.ErrBatchTooLarge, kerr.MessageTooLarge.Code},
	{log.ErrInvalidTimestamp, kerr.InvalidTimestamp.Code},
	{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{log.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{log.ErrDuplicateSequence, 0}, // answered as success with the original offset
	{log.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{log.ErrUnknownProducerID, kerr.UnknownProducerID.Code},
	{log.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced.Code},
	{log.ErrStorage, kerr.KafkaStorageError.Code},

	{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
	{context.Canceled, kerr.RequestTimedOut.Code},
}

// errCode maps err to a Kafka error code: 0 for nil, UNKNOWN_SERVER_ERROR
// for anything not in the table.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the optional error message for responses that carry one.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// recordIndexer is implemented by an error that knows which record of a
// batch was invalid (INVALID_RECORD with per-record RecordErrors, Produce
// v8+). Optional: the log may return a plain ErrInvalidRecord.
type recordIndexer interface {
	RecordIndex() int32
}
