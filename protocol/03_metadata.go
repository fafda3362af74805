package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// Metadata: v0-13
//
// Behaviour:
//   - Brokers (id, host, port, rack), cluster ID, controller ID, and the
//     requested topics from the broker's replicated metadata.
//   - All topics when Topics is null (v1+) or empty (v0); none when it is an
//     empty list (v1+).
//   - Auto-creation: a missing topic is created (Broker.AutoCreate, which
//     checks auto.create.topics.enable) when AllowAutoTopicCreation is set
//     (v4+) and always for v0-v3.
//   - Per topic: INVALID_TOPIC_EXCEPTION for a name Kafka would reject,
//     UNKNOWN_TOPIC_OR_PARTITION for a missing one, UNKNOWN_TOPIC_ID for an
//     unknown topic ID (v10+ requests by ID). Per partition:
//     LEADER_NOT_AVAILABLE (leader -1) when leaderless, and also before a
//     new partition's first election is recorded (this broker's copy of
//     the metadata can be a moment behind the controller's: leader epoch
//     0 is a placeholder, never served); replicas not among the live
//     brokers are listed as offline (v5+).
//   - A topic named (or identified) more than once is answered once, as
//     Kafka does (it reads the names into a set): otherwise a request
//     naming one topic of P partitions N times would be answered with N x P
//     partitions (issue 19: a 700 KB request, a 3 GB answer).
//   - Authorized operations (v8+), when asked for: the principal's
//     (fillOps, acl_rules.go); the topics it may not describe are hidden
//     by the ACL rule (metadata, below).
//
// Version notes:
//   - v1: null = all topics, rack, controller ID, internal flag
//   - v2: cluster ID; v3: throttle; v4: AllowAutoTopicCreation
//   - v5: offline replicas; v7: leader epoch; v8: authorized operations
//   - v9: flexible; v10: topic IDs; v11: cluster authorized operations
//     removed; v12: topics by ID with null name; v13: top-level error code
func init() { register(3, 0, 13, concurrent, (*Server).handleMetadata, (*authz).metadata) }

// authorizedOpsNotRequested is Kafka's sentinel for authorized operations
// that were not computed.
const authorizedOpsNotRequested = -2147483648

func (s *Server) handleMetadata(ctx context.Context, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := s.broker
	live := make(map[int32]bool)
	for _, bi := range b.Brokers() {
		if bi.Fenced {
			continue // its replicas are reported offline (replication/metadata_fencing.go)
		}
		live[bi.NodeID] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := b.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = b.ControllerID()
	resp.AuthorizedOperations = authorizedOpsNotRequested

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.Topics() {
			resp.Topics = append(resp.Topics, metadataTopic(t, live))
		}
		return resp, nil
	}

	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	seenNames := make(map[string]bool)
	seenIDs := make(map[[16]byte]bool)
	for _, rt := range req.Topics {
		if rt.Topic == nil || (req.Version >= 10 && rt.TopicID != [16]byte{}) {
			if seenIDs[rt.TopicID] {
				continue
			}
			seenIDs[rt.TopicID] = true
		} else {
			if seenNames[*rt.Topic] {
				continue
			}
			seenNames[*rt.Topic] = true
		}
		var mt kmsg.MetadataResponseTopic
		switch {
		case rt.Topic == nil || (req.Version >= 10 && rt.TopicID != [16]byte{}):
			if t, ok := b.TopicByID(rt.TopicID); ok {
				mt = metadataTopic(t, live)
			} else {
				mt = metadataError(rt.Topic, rt.TopicID, kerr.UnknownTopicID.Code)
			}
		case !validTopicName(*rt.Topic):
			mt = metadataError(rt.Topic, [16]byte{}, kerr.InvalidTopicException.Code)
		default:
			t, ok := b.Topic(*rt.Topic)
			if !ok && autoCreate {
				var err error
				t, err = b.AutoCreate(ctx, *rt.Topic)
				if err != nil {
					code := errCode(err)
					if errors.Is(err, replication.ErrUnknownTopicOrPartition) {
						code = kerr.UnknownTopicOrPartition.Code
					}
					mt = metadataError(rt.Topic, [16]byte{}, code)
					break
				}
				ok = true
			}
			if !ok {
				mt = metadataError(rt.Topic, [16]byte{}, kerr.UnknownTopicOrPartition.Code)
				break
			}
			mt = metadataTopic(t, live)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func metadataError(name *string, id [16]byte, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.ErrorCode = name, id, code
	mt.AuthorizedOperations = authorizedOpsNotRequested
	return mt
}

func metadataTopic(t replication.TopicInfo, live map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, t.Internal
	mt.AuthorizedOperations = authorizedOpsNotRequested
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
		if p.LeaderEpoch <= 0 {
			// Not elected yet: the metadata holds the first replica as a
			// placeholder at epoch 0 until the partition's group reports
			// its first election (epoch = raft term, 2 or more). A client
			// given the placeholder would be fenced by the elected epoch
			// (FENCED_LEADER_EPOCH), and franz-go then waits out its
			// metadata min age (5 s) before it fetches that partition
			// again; LEADER_NOT_AVAILABLE makes it retry metadata at once.
			mp.Leader, mp.LeaderEpoch = -1, -1
		}
		mp.Replicas = nonNil(p.Replicas)
		mp.ISR = nonNil(p.ISR)
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if !live[r] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// validTopicName applies Kafka's topic name rules (Topic.validate): 1-249
// characters of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (z *authz) metadata(r *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response)) {
	fill := fillOps(z, r)
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		return nil, func(resp kmsg.Response) {
			mr := resp.(*kmsg.MetadataResponse)
			keep := mr.Topics[:0]
			for _, t := range mr.Topics {
				if t.Topic != nil && z.ok(acl.Describe, acl.Topic, *t.Topic) {
					keep = append(keep, t)
				}
			}
			mr.Topics = keep
			if fill != nil {
				fill(resp)
			}
		}
	}
	autoCreate := r.Version < 4 || r.AllowAutoTopicCreation
	var keep []kmsg.MetadataRequestTopic
	var gone []kmsg.MetadataResponseTopic
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil && (r.Version < 10 || t.TopicID == [16]byte{}) {
			name = *t.Topic
		} else {
			name = z.topicName(t.TopicID)
			if name == "" {
				keep = append(keep, t) // unknown: the handler's UNKNOWN_TOPIC_ID
				continue
			}
		}
		denied := !z.ok(acl.Describe, acl.Topic, name)
		if !denied && autoCreate && z.s.broker != nil {
			if _, exists := z.s.broker.Topic(name); !exists && validTopicName(name) {
				denied = !z.cluster(acl.Create) && !z.ok(acl.Create, acl.Topic, name)
			}
		}
		if denied {
			gone = append(gone, metadataError(t.Topic, t.TopicID, errTopicAuth))
		} else {
			keep = append(keep, t)
		}
	}
	if len(gone) == 0 {
		return nil, fill
	}
	r.Topics = keep
	if len(keep) == 0 {
		r.Topics = []kmsg.MetadataRequestTopic{} // not nil: nil asks for all topics
	}
	return nil, func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		if r.Version == 0 && len(keep) == 0 {
			mr.Topics = nil // v0's empty list asked for all topics
		}
		mr.Topics = append(mr.Topics, gone...)
		if fill != nil {
			fill(resp)
		}
	}
}
