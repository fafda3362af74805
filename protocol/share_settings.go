package protocol

import "github.com/strata-io/strata/internal/groupconfig"

// groupShare resolves a share group's settings for the share-partition
// leader: its group configs (share.record.lock.duration.ms,
// share.delivery.count.limit, share.partition.max.record.locks,
// share.auto.offset.reset, share.isolation.level,
// share.renew.acknowledge.enable) over the broker's group.share.*
// defaults (share_config.go).
func (s *Server) groupShare(group string) groupShare {
	st := s.shareSettings(group)
	gs := groupShare{part: st.part(), readCommitted: st.readCommitted, renew: st.renew, recordTimes: st.recordTimes}
	if st.dlqTopic != "" && s.featureLevel(featureShare) >= 2 {
		// KIP-1191: dead letters need share.version 2.
		b := s.cfg.GroupConfig
		gs.dlq = dlqSettings{topic: st.dlqTopic, copyRecord: st.dlqCopy, redriveLimit: st.redriveLimit, prefix: b.DLQTopicNamePrefix, autoCreate: b.DLQAutoCreateTopics,
			floodRatio: b.FloodRatio, floodWindow: b.FloodWindow, floodMin: int64(b.FloodMinDeliveries)}
		gs.part.DeadLetters = true
	}
	gs.part.Paused = st.paused
	switch st.reset.Kind {
	case groupconfig.ResetEarliest:
		gs.earliest = true
	case groupconfig.ResetByDuration:
		gs.byTimeMs = max(st.reset.Timestamp(s.share.cfg.Now().UnixMilli()), 1)
	}
	return gs
}
