package protocol

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/log"
)

// Client quotas, enforced as Kafka's quota managers do (internal/quota
// has the model; the configs are the replicated metadata's,
// replication/metadata_quotas.go, set by AlterClientQuotas):
//
//   - producer_byte_rate: a Produce request's size is charged when it is
//     read (the reader goroutine), so the connection is muted before the
//     next request is taken.
//   - consumer_byte_rate: a Fetch's record bytes are charged before its
//     session records them as sent; over the quota the Fetch is answered
//     empty with the throttle time and its bytes are not charged, as
//     Kafka does (fetchThrottled). A Fetch asks for at most what the quota
//     allows in one window (Kafka's maxValueInQuotaWindow). A ShareFetch's
//     record bytes are charged when its handler is done (its records are
//     acquired by then, so they are sent, with the throttle time).
//   - request_percentage: the time a request spends in its handler, as a
//     percentage of one thread per second (100 = one thread), minus the
//     time a Fetch or ShareFetch parks in a long poll and a Produce waits
//     on its partitions' Raft groups (append and commit); JoinGroup and
//     SyncGroup (which park for a rebalance) are not charged but are
//     throttled. ApiVersions and the SASL requests are exempt, as in
//     Kafka.
//   - controller_mutation_rate (KIP-599): the partitions a CreateTopics,
//     CreatePartitions or DeleteTopics creates or deletes, charged per
//     topic; from CreateTopics v6, CreatePartitions v3 and DeleteTopics v5
//     a topic asked while the bucket is below zero is refused with
//     THROTTLING_QUOTA_EXCEEDED, older versions are throttled instead.
//
// The throttle time is the largest of the request's quotas'; it goes into
// the response's throttle_time_ms at once and the connection is muted
// (KIP-219): no further request of the client is taken until the time has
// passed. For the versions before KIP-219 (Throttle() reports the
// throttle as applied before the response) the response itself is held
// back for that time, as Kafka does for old clients.
//
// The user is the principal's name (User:alice is alice; ANONYMOUS on a
// PLAINTEXT listener), the client ID the request header's. Nothing here
// costs anything while no quota of the type is configured.

// reqQuota is one request's quota state, carried in its context while any
// quota is configured.
type reqQuota struct {
	set      *quota.Set
	user     string
	clientID string
	// parkedNs is the time the handler parked in a long poll (not
	// charged to request_percentage); mutationMs the largest controller
	// mutation throttle of the request.
	parkedNs   atomic.Int64
	mutationMs atomic.Int64
	// bandwidthMs is the Produce throttle, set by the reader before the
	// handler starts.
	bandwidthMs int64
	// fetchMs is the Fetch throttle and fetchCharged whether the Fetch
	// handler charged its bytes itself (fetchThrottled).
	fetchMs      atomic.Int64
	fetchCharged atomic.Bool
}

type reqQuotaKey struct{}

func reqQuotaFrom(ctx context.Context) *reqQuota {
	q, _ := ctx.Value(reqQuotaKey{}).(*reqQuota)
	return q
}

// parked records d spent waiting in a long poll.
func parked(ctx context.Context, d time.Duration) {
	if q := reqQuotaFrom(ctx); q != nil {
		q.parkedNs.Add(int64(d))
	}
}

// quotaUser is the quota user of a principal: its name without the type.
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// quotaSet is the configured quotas, nil when none (or no broker).
func (s *Server) quotaSet() *quota.Set {
	if s.broker == nil {
		return nil
	}
	set := s.broker.ClientQuotas()
	if set.Len() == 0 {
		return nil
	}
	return set
}

func nowMs() int64 { return time.Now().UnixMilli() }

// quotaExempt lists the requests charged to no quota (Kafka's
// sendResponseExemptThrottle).
func quotaExempt(key int16) bool { return key == 17 || key == 18 || key == 36 }

// mute stops the reader from taking requests until throttleMs from now.
func (c *conn) mute(throttleMs int64) {
	if throttleMs <= 0 {
		return
	}
	until := time.Now().Add(time.Duration(throttleMs) * time.Millisecond).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted waits out a mute (KIP-219); false when the connection closes
// or the server drains meanwhile.
func (c *conn) waitMuted() bool {
	for {
		d := time.Until(time.Unix(0, c.mutedUntil.Load()))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return false
		case <-c.s.draining:
			t.Stop()
			return true // the reader stops at its next read
		}
	}
}

// quotaBefore runs in the reader for a decoded request: it charges a
// Produce's size, caps a Fetch's size to the consumer quota, and returns
// the request's quota state (nil: no quota configured).
func (c *conn) quotaBefore(kreq kmsg.Request, clientID *string, size int64) *reqQuota {
	set := c.s.quotaSet()
	if set == nil || quotaExempt(kreq.Key()) {
		return nil
	}
	q := &reqQuota{set: set, user: quotaUser(c.Principal())}
	if clientID != nil {
		q.clientID = *clientID
	}
	switch r := kreq.(type) {
	case *kmsg.ProduceRequest:
		if th := c.s.quotas.Record(set, quota.Produce, q.user, q.clientID, float64(size), nowMs()); th > 0 {
			c.s.quotaMetrics.throttled(quota.Produce, th)
			c.mute(th)
			q.bandwidthMs = th
		}
	case *kmsg.FetchRequest:
		if limit, ok := c.s.quotas.MaxValueInWindow(set, quota.Fetch, q.user, q.clientID); ok {
			if lim := int32(min(limit, float64(1<<31-1))); r.MaxBytes <= 0 || r.MaxBytes > lim {
				r.MaxBytes = max(lim, 1)
				if r.MinBytes > r.MaxBytes {
					r.MinBytes = r.MaxBytes
				}
			}
		}
	}
	return q
}

// quotaAfter runs after a handler: it charges the fetched bytes and the
// handler's time, sets the response's throttle time to the largest
// throttle of the request and mutes the connection for it. It returns how
// long the response must be held back (versions before KIP-219).
func (c *conn) quotaAfter(q *reqQuota, key int16, resp kmsg.Response, handlerTime time.Duration) time.Duration {
	now := nowMs()
	th := q.bandwidthMs
	m := c.s.quotas
	switch r := resp.(type) {
	case *fetchResponse:
		if !q.fetchCharged.Load() {
			th = max(th, c.recordFetch(q, fetchBytes(r.FetchResponse, r.regions), now))
		}
	case *kmsg.FetchResponse:
		if !q.fetchCharged.Load() {
			th = max(th, c.recordFetch(q, fetchBytes(r, nil), now))
		}
	case *shareFetchResponse:
		th = max(th, c.recordFetch(q, shareFetchBytes(r.ShareFetchResponse, r.regions), now))
	case *kmsg.ShareFetchResponse:
		th = max(th, c.recordFetch(q, shareFetchBytes(r, nil), now))
	}
	th = max(th, q.fetchMs.Load())
	var rt int64
	switch key {
	case 11, 14: // JoinGroup, SyncGroup park for a rebalance: throttled, not charged
		rt = m.Throttle(q.set, quota.Request, q.user, q.clientID, now)
	default:
		busy := handlerTime - time.Duration(q.parkedNs.Load())
		pct := max(float64(busy), 0) * 100 / float64(time.Second)
		rt = m.Record(q.set, quota.Request, q.user, q.clientID, pct, now)
	}
	if rt > 0 {
		c.s.quotaMetrics.throttled(quota.Request, rt)
	}
	th = max(th, rt)
	if mt := q.mutationMs.Load(); mt > 0 {
		c.s.quotaMetrics.throttled(quota.ControllerMutation, mt)
		th = max(th, mt)
	}
	if th <= 0 {
		return 0
	}
	c.mute(th)
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return 0
	}
	if cur, _ := tr.Throttle(); int64(cur) > th {
		th = int64(cur)
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(int32(min(th, 1<<31-1)))
	}
	if _, after := tr.Throttle(); !after {
		return time.Duration(th) * time.Millisecond
	}
	return 0
}

func (c *conn) recordFetch(q *reqQuota, n int64, now int64) int64 {
	th := c.s.quotas.Record(q.set, quota.Fetch, q.user, q.clientID, float64(n), now)
	if th > 0 {
		c.s.quotaMetrics.throttled(quota.Fetch, th)
	}
	return th
}

// fetchBytes is the record bytes of a Fetch response (the rest of the
// response is small beside them).
func fetchBytes(r *kmsg.FetchResponse, regions map[regionKey]*log.Region) int64 {
	var n int64
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			n += int64(len(r.Topics[i].Partitions[j].RecordBatches))
		}
	}
	for _, rg := range regions {
		if rg != nil {
			n += rg.Len
		}
	}
	return n
}

func shareFetchBytes(r *kmsg.ShareFetchResponse, regions map[regionKey]*log.Region) int64 {
	var n int64
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			n += int64(len(r.Topics[i].Partitions[j].Records))
		}
	}
	for _, rg := range regions {
		if rg != nil {
			n += rg.Len
		}
	}
	return n
}

// mutationQuota charges n partition mutations of a CreateTopics,
// CreatePartitions or DeleteTopics topic (KIP-599). strict (the versions
// that know the error): a refusal is THROTTLING_QUOTA_EXCEEDED with
// Kafka's message; 0 when the topic may go ahead.
func (s *Server) mutationQuota(ctx context.Context, strict bool, n int) (int16, string) {
	q := reqQuotaFrom(ctx)
	if q == nil || n <= 0 {
		return 0, ""
	}
	ok, th := s.quotas.Mutation(q.set, q.user, q.clientID, float64(n), strict, nowMs())
	for {
		cur := q.mutationMs.Load()
		if th <= cur || q.mutationMs.CompareAndSwap(cur, th) {
			break
		}
	}
	if !ok {
		return kerr.ThrottlingQuotaExceeded.Code, kerr.ThrottlingQuotaExceeded.Message + ": " + kerr.ThrottlingQuotaExceeded.Description
	}
	return 0, ""
}

// quotaMetrics are the throttle series, by Kafka's quota type:
//
//	kafka_server_quota_throttle_time_seconds{quota_type}  kafka.server:type={Produce,Fetch,Request,ControllerMutation},user=,client-id= throttle-time
//
// observed for every throttled response (Kafka averages every response,
// throttled or not, per user and client ID; the labels here stay bounded).
type quotaMetrics struct {
	hist [5]prometheus.Observer // by quota.Kind
}

func newQuotaMetrics(reg prometheus.Registerer) *quotaMetrics {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kafka_server_quota_throttle_time_seconds",
		Help:    "Throttle time of throttled responses (client quotas), by quota type: Produce (producer_byte_rate), Fetch (consumer_byte_rate), Request (request_percentage), ControllerMutation (controller_mutation_rate); ConnectionCreation (connection_creation_rate): how long a refused connection was held before it was closed.",
		Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"quota_type"})
	m := &quotaMetrics{}
	for _, k := range quota.Kinds {
		m.hist[k] = h.WithLabelValues(k.String())
	}
	if reg != nil {
		reg.MustRegister(h)
	}
	return m
}

func (m *quotaMetrics) throttled(k quota.Kind, ms int64) {
	m.hist[k].Observe(float64(ms) / 1000)
}

// connectionQuota applies connection_creation_rate (KIP-612) to a new
// connection: within the quota it returns false and the connection is
// served; over it, the connection is held unread for the throttle time
// and then closed (Kafka's acceptor delays the close the same way), and
// true is returned.
func (s *Server) connectionQuota(nc net.Conn) bool {
	set := s.quotaSet()
	if set == nil {
		return false
	}
	th := s.quotas.Connection(set, remoteIP(nc), nowMs())
	if th <= 0 {
		return false
	}
	s.quotaMetrics.throttled(quota.Connection, th)
	s.log.Info("closing connection: connection_creation_rate exceeded for its address", "remote", nc.RemoteAddr().String(), "throttle_ms", th)
	time.AfterFunc(min(time.Duration(th)*time.Millisecond, s.cfg.ConnectionsMaxIdle), func() { nc.Close() })
	return true
}

// fetchThrottled charges what a Fetch read, before its session records it
// as sent, and reports the throttle time when that puts the client over
// its consumer quota: then, as Kafka does, the bytes are taken back and
// the handler answers an empty throttled response instead (the session
// stays where it was, so the client fetches the same records after the
// throttle).
func (s *Server) fetchThrottled(ctx context.Context, parts []*fetchPart) int64 {
	q := reqQuotaFrom(ctx)
	if q == nil {
		return 0
	}
	var n int64
	for _, fp := range parts {
		n += int64(len(fp.resp.RecordBatches))
		if fp.region != nil {
			n += fp.region.Len
		}
	}
	now := nowMs()
	q.fetchCharged.Store(true)
	th := s.quotas.Record(q.set, quota.Fetch, q.user, q.clientID, float64(n), now)
	if th <= 0 {
		return 0
	}
	s.quotas.Unrecord(q.set, quota.Fetch, q.user, q.clientID, float64(n), now)
	s.quotaMetrics.throttled(quota.Fetch, th)
	q.fetchMs.Store(th)
	return th
}

// countClientQuotas counts the elements of a DescribeClientQuotas (its
// filter components) or an AlterClientQuotas (entries, their entity
// components and ops) without allocating, stopping past limit
// (element_limits.go): an entry is 3 bytes on the wire and a 64-byte
// struct once decoded.
func countClientQuotas(body []byte, key, version int16, limit int) int {
	r := &scanner{b: body, flexible: version >= 1, ok: true}
	if key == 48 {
		return r.arrayLen()
	}
	entries := r.arrayLen()
	total := entries
	for i := 0; i < entries && r.ok && total <= limit; i++ {
		comps := r.arrayLen()
		total += comps
		for j := 0; j < comps && r.ok && total <= limit; j++ {
			r.nullableString() // type
			r.nullableString() // name
			r.tags()
		}
		ops := r.arrayLen()
		total += ops
		for j := 0; j < ops && r.ok && total <= limit; j++ {
			r.nullableString() // key
			r.skip(8 + 1)      // value, remove
			r.tags()
		}
		r.tags()
	}
	return total
}
