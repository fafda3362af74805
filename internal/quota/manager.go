package quota

import (
	"sync"
)

// Kind is a quota type, as Kafka's QuotaType names them.
type Kind int

const (
	Produce Kind = iota
	Fetch
	Request
	ControllerMutation
	// Connection is connection_creation_rate, per IP (KIP-612).
	Connection
	numKinds
)

// Kinds lists the quota types.
var Kinds = []Kind{Produce, Fetch, Request, ControllerMutation, Connection}

// String is Kafka's QuotaType name (its JMX type=).
func (k Kind) String() string {
	switch k {
	case Produce:
		return "Produce"
	case Fetch:
		return "Fetch"
	case Request:
		return "Request"
	case ControllerMutation:
		return "ControllerMutation"
	case Connection:
		return "ConnectionCreation"
	}
	return "unknown"
}

// Key is the config key of the quota type.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return ProducerByteRate
	case Fetch:
		return ConsumerByteRate
	case Request:
		return RequestPercentage
	case Connection:
		return ConnectionCreationRate
	}
	return ControllerMutationRate
}

// SensorKey names the measured rate a request is charged to: the user
// and/or the client ID, as the entity of its quota names them (doc.go).
type SensorKey struct {
	User, ClientID       string
	HasUser, HasClientID bool
}

// Resolve finds the quota of key for (user, clientID) by Kafka's
// precedence (doc.go) and the sensor key it is measured under; ok is
// false when no entity sets key for them.
func (s *Set) Resolve(key, user, clientID string) (limit float64, sk SensorKey, ok bool) {
	if !s.Has(key) {
		return 0, sk, false
	}
	u, c := Named(user), Named(clientID)
	for _, e := range [...]Entity{
		{User: u, ClientID: c},
		{User: u, ClientID: DefaultPart},
		{User: u},
		{User: DefaultPart, ClientID: c},
		{User: DefaultPart, ClientID: DefaultPart},
		{User: DefaultPart},
		{ClientID: c},
		{ClientID: DefaultPart},
	} {
		if v, found := s.m[e][key]; found {
			sk = SensorKey{HasUser: e.User.Set, HasClientID: e.ClientID.Set}
			if sk.HasUser {
				sk.User = user
			}
			if sk.HasClientID {
				sk.ClientID = clientID
			}
			return v, sk, true
		}
	}
	return 0, sk, false
}

// Limits on the sensors kept per quota type: one per measured user
// and/or client ID, dropped after an hour unused (Kafka's
// INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS) or, past MaxSensors, the least
// recently used first.
const (
	MaxSensors       = 100000
	sensorIdleExpiry = 3600 * 1000
)

type sensor struct {
	mu     sync.Mutex
	rate   *Rate        // byte and request quotas; protected by mu
	bucket *TokenBucket // controller_mutation_rate; protected by mu
	lastMs int64        // last use; protected by Manager.mu
}

// Manager measures rates and computes throttle times for every quota
// type. Safe for concurrent use.
type Manager struct {
	w          Window
	maxSensors int

	mu      sync.Mutex
	sensors [numKinds]map[SensorKey]*sensor // protected by mu
}

// NewManager returns a manager measuring over w.
func NewManager(w Window) *Manager {
	m := &Manager{w: w.valid(), maxSensors: MaxSensors}
	for i := range m.sensors {
		m.sensors[i] = map[SensorKey]*sensor{}
	}
	return m
}

// Window is the measurement window.
func (m *Manager) Window() Window { return m.w }

func (m *Manager) sensor(k Kind, sk SensorKey, nowMs int64) *sensor {
	m.mu.Lock()
	defer m.mu.Unlock()
	tab := m.sensors[k]
	s := tab[sk]
	if s == nil {
		if len(tab) >= m.maxSensors {
			m.evict(tab, nowMs)
		}
		s = &sensor{}
		if k == ControllerMutation {
			s.bucket = NewTokenBucket(m.w)
		} else {
			s.rate = NewRate(m.w)
		}
		tab[sk] = s
	}
	s.lastMs = nowMs
	return s
}

// evict drops the sensors idle past the expiry, and the least recently
// used one if none is.
func (m *Manager) evict(tab map[SensorKey]*sensor, nowMs int64) {
	var lru SensorKey
	lruMs := int64(-1)
	n := len(tab)
	for k, s := range tab {
		if nowMs-s.lastMs >= sensorIdleExpiry {
			delete(tab, k)
			continue
		}
		if lruMs < 0 || s.lastMs < lruMs {
			lru, lruMs = k, s.lastMs
		}
	}
	if len(tab) == n && lruMs >= 0 {
		delete(tab, lru)
	}
}

// Sensors is the number of sensors kept for k.
func (m *Manager) Sensors(k Kind) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sensors[k])
}

// Record charges v to (user, clientID) for the rate quota k at nowMs and
// returns the throttle time (0: within the quota, or no quota applies),
// as ClientQuotaManager.recordAndGetThrottleTimeMs.
func (m *Manager) Record(set *Set, k Kind, user, clientID string, v float64, nowMs int64) int64 {
	limit, sk, ok := set.Resolve(k.Key(), user, clientID)
	if !ok || k == ControllerMutation || k == Connection {
		return 0
	}
	s := m.sensor(k, sk, nowMs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.Record(v, nowMs)
	return s.rate.ThrottleMs(limit, nowMs)
}

// Unrecord takes back v charged by Record (Kafka's unrecordQuotaSensor:
// a throttled Fetch sends nothing, so its bytes do not count).
func (m *Manager) Unrecord(set *Set, k Kind, user, clientID string, v float64, nowMs int64) {
	_, sk, ok := set.Resolve(k.Key(), user, clientID)
	if !ok || k == ControllerMutation || k == Connection {
		return
	}
	s := m.sensor(k, sk, nowMs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.Record(-v, nowMs)
}

// Throttle is the throttle time of (user, clientID) for k at nowMs
// without recording anything.
func (m *Manager) Throttle(set *Set, k Kind, user, clientID string, nowMs int64) int64 {
	limit, sk, ok := set.Resolve(k.Key(), user, clientID)
	if !ok {
		return 0
	}
	s := m.sensor(k, sk, nowMs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bucket != nil {
		return s.bucket.ThrottleMs(limit, nowMs)
	}
	return s.rate.ThrottleMs(limit, nowMs)
}

// MaxValueInWindow is the largest value that can be recorded at once
// without being throttled whatever came before (Kafka's
// maxValueInQuotaWindow: the quota over num-1 windows); ok false when no
// quota applies. Fetch caps its response size with it.
func (m *Manager) MaxValueInWindow(set *Set, k Kind, user, clientID string) (float64, bool) {
	limit, _, ok := set.Resolve(k.Key(), user, clientID)
	if !ok {
		return 0, false
	}
	return limit * float64(m.w.Samples-1) * float64(m.w.SizeMs) / 1000, true
}

// Mutation charges v partition mutations (KIP-599) to (user, clientID)
// at nowMs. Strict (the versions that know THROTTLING_QUOTA_EXCEEDED):
// refused (allowed false, with the throttle time) while the bucket is
// below zero, else taken even if that takes it below. Permissive (older
// versions): always taken, and the throttle time is the bucket's after.
func (m *Manager) Mutation(set *Set, user, clientID string, v float64, strict bool, nowMs int64) (allowed bool, throttleMs int64) {
	limit, sk, ok := set.Resolve(ControllerMutationRate, user, clientID)
	if !ok {
		return true, 0
	}
	s := m.sensor(ControllerMutation, sk, nowMs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if strict {
		if t := s.bucket.ThrottleMs(limit, nowMs); t > 0 || s.bucket.Tokens(limit, nowMs) < 0 {
			return false, t
		}
		s.bucket.Record(v, limit, nowMs)
		return true, 0
	}
	s.bucket.Record(v, limit, nowMs)
	return true, s.bucket.ThrottleMs(limit, nowMs)
}

// ResolveIP finds the connection_creation_rate of ip: its own entity's,
// else the ip default's (KIP-612).
func (s *Set) ResolveIP(ip string) (float64, bool) {
	if !s.Has(ConnectionCreationRate) {
		return 0, false
	}
	for _, e := range [...]Entity{{IP: Named(ip)}, {IP: DefaultPart}} {
		if v, ok := s.m[e][ConnectionCreationRate]; ok {
			return v, true
		}
	}
	return 0, false
}

// Connection charges a new connection from ip at nowMs and returns the
// throttle time: above the quota the connection is not counted (it is
// refused; Kafka's ConnectionQuotas un-records it) and the caller holds it
// that long before closing it.
func (m *Manager) Connection(set *Set, ip string, nowMs int64) int64 {
	limit, ok := set.ResolveIP(ip)
	if !ok {
		return 0
	}
	s := m.sensor(Connection, SensorKey{User: ip, HasUser: true}, nowMs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.Record(1, nowMs)
	th := s.rate.ThrottleMs(limit, nowMs)
	if th > 0 {
		s.rate.Record(-1, nowMs)
	}
	return th
}
