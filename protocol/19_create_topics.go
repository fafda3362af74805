package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// CreateTopics: v0-7
//
// Behaviour:
//   - Each topic goes to Broker.CreateTopic (which validates name, partition
//     count, replication factor, assignment and configs, and checks it is the
//     controller). NumPartitions / ReplicationFactor -1 take the broker
//     defaults (num.partitions, default.replication.factor).
//   - Manual assignment (ReplicaAssignment) requires NumPartitions and
//     ReplicationFactor to be -1 (INVALID_REQUEST otherwise, as Kafka), and
//     partitions must be 0..n-1 without duplicates (INVALID_REPLICA_ASSIGNMENT).
//   - A topic named twice in one request: INVALID_REQUEST for each occurrence.
//   - A config given twice or with a null value: INVALID_CONFIG.
//   - ValidateOnly (v1+) validates and reports without creating.
//   - Errors carry a message (v1+). v5+ return partitions, replication factor
//     and the topic's configs (-1/-1/none on error); v7 returns the topic ID.
//   - TimeoutMillis bounds the creation: REQUEST_TIMED_OUT after it.
//
// controller_mutation_rate (KIP-599, quotas.go): each topic's partitions
// are charged before it is changed; from v6 a topic asked while the
// client's bucket is below zero gets THROTTLING_QUOTA_EXCEEDED, older
// versions are throttled instead.
//
// Version notes:
// * v1: ValidateOnly, ErrorMessage; v2: throttle; v4: -1 defaults
// * v5: flexible, configs in the response; v6: no change; v7: topic ID
func init() { register(19, 0, 7, barrier, (*Server).handleCreateTopics, (*authz).createTopics) }

func (s *Server) handleCreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 {
				st.ErrorMessage = &msg
			}
		}
		ct, code, msg := createTopicRequest(rt, seen[rt.Topic] > 1, req.ValidateOnly)
		if code != 0 {
			fail(code, msg)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if code, msg := s.mutationQuota(ctx, req.Version >= 6, s.newTopicPartitions(ct)); code != 0 {
			fail(code, msg) // KIP-599 (quotas.go)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, err := s.createTopicBounded(ctx, ct)
		if errors.Is(err, replication.ErrTopicExists) {
			// Kafka's wording: kafka-topics prints it to the operator.
			fail(kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err != nil {
			fail(errCode(err), err.Error())
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = int32(len(t.Partitions))
		if len(t.Partitions) > 0 {
			st.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
		}
		if req.Version >= 5 {
			st.Configs = s.createdTopicConfigs(t, req.ValidateOnly)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// createTopicBounded is Broker.CreateTopic answered by ctx's end at the
// latest: REQUEST_TIMED_OUT (retriable) when the creation is not done by
// then, as Kafka answers when its controller is slow. The creation goes
// on and may still complete (its waits are bounded: the writer lock and
// the leaders' election by ctx, the commit by the metadata apply timeout);
// a client retrying it gets TOPIC_ALREADY_EXISTS then, as from Kafka.
// Under a burst of creations (issue 15's 300 partitions at once) a probe
// otherwise waited out the commit of every creation queued before it.
func (s *Server) createTopicBounded(ctx context.Context, ct replication.CreateTopicRequest) (replication.TopicInfo, error) {
	type result struct {
		t   replication.TopicInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil { // a bug: fails this topic, not the process (recover.go)
				var code int16
				s.recoverPanicked(&code, r, "create topic", ct.Name, -1)
				done <- result{err: fmt.Errorf("%w: creating %s panicked: %v", ErrHandlerPanic, ct.Name, r)}
			}
		}()
		t, err := s.broker.CreateTopic(ctx, ct)
		done <- result{t, err}
	}()
	select {
	case r := <-done:
		return r.t, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // finished meanwhile
			return r.t, r.err
		default:
			return replication.TopicInfo{}, ctx.Err()
		}
	}
}

// createTopicRequest turns one request topic into the broker's form, doing
// the checks Kafka does before any metadata is touched.
func createTopicRequest(rt kmsg.CreateTopicsRequestTopic, duplicate, validateOnly bool) (replication.CreateTopicRequest, int16, string) {
	ct := replication.CreateTopicRequest{
		Name:              rt.Topic,
		NumPartitions:     rt.NumPartitions,
		ReplicationFactor: rt.ReplicationFactor,
		ValidateOnly:      validateOnly,
	}
	if duplicate {
		return ct, kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is named more than once in the request", rt.Topic)
	}
	if !validTopicName(rt.Topic) {
		return ct, kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is not valid", rt.Topic)
	}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return ct, kerr.InvalidRequest.Code, "both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time"
		}
		ct.Assignment = make(map[int32][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if _, dup := ct.Assignment[a.Partition]; dup {
				return ct, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("partition %d is assigned twice", a.Partition)
			}
			ct.Assignment[a.Partition] = a.Replicas
		}
		for p := range int32(len(rt.ReplicaAssignment)) {
			if _, ok := ct.Assignment[p]; !ok {
				return ct, kerr.InvalidReplicaAssignment.Code, "partitions should be a consecutive 0-based integer sequence"
			}
		}
	}
	if len(rt.Configs) > 0 {
		ct.Configs = make(map[string]string, len(rt.Configs))
		for _, c := range rt.Configs {
			if c.Value == nil {
				return ct, kerr.InvalidConfig.Code, fmt.Sprintf("null value not supported for topic config %q", c.Name)
			}
			if _, dup := ct.Configs[c.Name]; dup {
				return ct, kerr.InvalidConfig.Code, fmt.Sprintf("config %q is given more than once", c.Name)
			}
			ct.Configs[c.Name] = *c.Value
		}
	}
	return ct, 0, ""
}

// createdTopicConfigs lists a new topic's configs for the v5+ response, a
// validate-only topic's too (the configs it would have: the Java admin
// client reads the list, and a null one fails it). The list is never null.
func (s *Server) createdTopicConfigs(t replication.TopicInfo, validateOnly bool) []kmsg.CreateTopicsResponseTopicConfig {
	out := []kmsg.CreateTopicsResponseTopicConfig{}
	entries, err := s.broker.TopicConfig(t.Name)
	if validateOnly {
		entries, err = s.broker.TopicConfigWith(t.Configs)
	}
	if err == nil {
		for _, e := range entries {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Source, e.Sensitive
			out = append(out, c)
		}
		return out
	}
	for name, v := range t.Configs {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		v := v
		c.Name, c.Value, c.Source = name, &v, 1 // DYNAMIC_TOPIC_CONFIG
		out = append(out, c)
	}
	return out
}

// newTopicPartitions is the number of partitions ct creates, charged to
// controller_mutation_rate (quotas.go).
func (s *Server) newTopicPartitions(ct replication.CreateTopicRequest) int {
	switch {
	case len(ct.Assignment) > 0:
		return len(ct.Assignment)
	case ct.NumPartitions > 0:
		return int(ct.NumPartitions)
	case s.broker != nil:
		return int(max(s.broker.Config().NumPartitions, 1))
	}
	return 1
}

// createTopics: CREATE on the cluster, or on each topic.
func (z *authz) createTopics(r *kmsg.CreateTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if z.cluster(acl.Create) {
		return nil, nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Create, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range gone {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, errTopicAuth
			st.NumPartitions, st.ReplicationFactor = -1, -1
			cr.Topics = append(cr.Topics, st)
		}
	}
}
