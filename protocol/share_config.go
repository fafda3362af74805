package protocol

import (
	"time"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/sharepart"
)

// Share groups' settings as the share-partition leader and the share APIs
// use them: a group's configs (IncrementalAlterConfigs on GROUP resources,
// kept in the replicated metadata: replication/metadata_group_configs.go) over the
// broker's group.share.* settings (Config.GroupConfig), resolved per
// request; and the share.version feature that turns share groups on and
// off (UpdateFeatures, 57_update_features.go).

// ShareVersionOff is Config.ShareVersion for share.version 0 (the setting
// share.version=0): share groups are refused until kafka-features upgrades
// the feature.
const ShareVersionOff int16 = -1

// shareSettings are one share group's effective settings.
type shareSettings struct {
	// lock is share.record.lock.duration.ms: how long an acquired record
	// stays with its member.
	lock time.Duration
	// deliveryLimit is share.delivery.count.limit: a record delivered this
	// many times is archived instead of being delivered again.
	deliveryLimit int
	// maxLocks is share.partition.max.record.locks: the most records in
	// flight past a share partition's start offset.
	maxLocks int
	// reset is share.auto.offset.reset: where a share partition without
	// state starts (latest: the high watermark; earliest: the log start;
	// by_duration: the first record at or after reset.Timestamp(now)).
	reset groupconfig.AutoOffsetReset
	// readCommitted is share.isolation.level=read_committed: records of
	// aborted transactions are archived, never delivered, and nothing past
	// the last stable offset is acquired.
	readCommitted bool
	// renew is share.renew.acknowledge.enable: whether RENEW
	// acknowledgements (KIP-1222) are accepted.
	renew bool
	// dlqTopic and dlqCopy are errors.deadletterqueue.topic.name and
	// errors.deadletterqueue.copy.record.enable (KIP-1191).
	dlqTopic string
	dlqCopy  bool
	// paused is strata.share.dlq.flood.paused: the dead-letter flood
	// guard stopped deliveries to the group.
	paused bool
	// backoff is strata.share.redelivery.backoff.*: delayed redelivery.
	backoffInitial, backoffMax time.Duration
	backoffMultiplier          float64
	backoffJitter              float64
	// ttl is strata.share.record.ttl.ms (0 = none).
	ttl time.Duration
	// recordTimes is strata.share.record.headers.enable.
	recordTimes bool
	// redriveLimit is strata.share.dlq.redrive.limit (0 = none).
	redriveLimit int
}

// part is the sharepart decision inputs of these settings.
func (st shareSettings) part() sharepart.Config {
	return sharepart.Config{LockMs: st.lock.Milliseconds(), DeliveryLimit: int16(st.deliveryLimit), MaxLocks: st.maxLocks,
		BackoffInitialMs: st.backoffInitial.Milliseconds(), BackoffMaxMs: st.backoffMax.Milliseconds(), BackoffMultiplier: st.backoffMultiplier,
		BackoffJitter: st.backoffJitter, TTLMs: st.ttl.Milliseconds()}
}

// shareSettings returns group's effective share settings: the group's
// configs where set, else the broker's. A map lookup in the current
// metadata image and a few integer parses when the group has overrides;
// no lock, no allocation: cheap enough for every ShareFetch and
// ShareAcknowledge.
func (s *Server) shareSettings(group string) shareSettings {
	e := s.groupSettings(group)
	return shareSettings{
		lock:          e.RecordLockDuration,
		deliveryLimit: e.DeliveryCountLimit,
		maxLocks:      e.PartitionMaxRecordLocks,
		reset:         e.AutoOffsetReset,
		readCommitted: e.ReadCommitted,
		renew:         e.RenewAcknowledgeEnable,
		dlqTopic:      e.DLQTopicName,
		dlqCopy:       e.DLQCopyRecordEnable,
		paused:        e.FloodPaused,

		backoffInitial:    e.BackoffInitial,
		backoffMax:        e.BackoffMax,
		backoffMultiplier: e.BackoffMultiplier,
		backoffJitter:     e.BackoffJitter,
		ttl:               e.RecordTTL,
		recordTimes:       e.RecordHeaders,
		redriveLimit:      e.RedriveLimit,
	}
}

// groupSettings returns every effective setting of group (share and
// consumer, membership included: session timeouts and heartbeat
// intervals).
func (s *Server) groupSettings(group string) groupconfig.Effective {
	return groupconfig.Resolve(s.broker.GroupConfigsView(group), s.cfg.GroupConfig)
}

// shareEnabled reports whether share groups are served: the share.version
// feature is finalized at 1 or more (UpdateFeatures, else the
// share.version setting). When it is not, ShareGroupHeartbeat,
// ShareGroupDescribe, ShareFetch and ShareAcknowledge answer
// UNSUPPORTED_VERSION, as Kafka 4.4 does.
func (s *Server) shareEnabled() bool { return s.featureLevel(featureShare) >= 1 }
