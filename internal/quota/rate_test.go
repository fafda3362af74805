package quota

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

// A client that waits out every throttle time it is given is held to its
// quota: under an injected clock, the bytes it gets through in five
// minutes of steady state are within 5% of the quota, for Kafka's
// default window and for a short one, with fixed and random request
// sizes (KIP-13, KIP-219: the throttle time is the time that brings the
// observed rate back to the quota).
func TestRateHoldsQuotaWithin5Percent(t *testing.T) {
	const quota = 100_000.0 // bytes per second
	for _, c := range []struct {
		name   string
		w      Window
		size   func(*rand.Rand) float64
		gapMs  int64 // the client's own time between requests
		seed   int64
		within float64
	}{
		{"default window, 10 KB requests", DefaultWindow, func(*rand.Rand) float64 { return 10_000 }, 1, 1, 0.05},
		{"default window, 1-64 KB requests", DefaultWindow, func(r *rand.Rand) float64 { return float64(1000 + r.Intn(63_000)) }, 2, 7, 0.05},
		{"3 x 500 ms window, 4 KB requests", Window{Samples: 3, SizeMs: 500}, func(*rand.Rand) float64 { return 4000 }, 0, 3, 0.05},
		{"default window, 300 KB requests (above the quota)", DefaultWindow, func(*rand.Rand) float64 { return 300_000 }, 5, 4, 0.05},
	} {
		t.Run(c.name, func(t *testing.T) {
			rnd := rand.New(rand.NewSource(c.seed))
			m := NewManager(c.w)
			set, err := (*Set)(nil).With([]Change{{Entity: Entity{User: Named("alice")}, Set: map[string]float64{ProducerByteRate: quota}}})
			if err != nil {
				t.Fatal(err)
			}
			now := int64(1_700_000_000_000)
			start := now
			var steady float64
			const warmMs, runMs = 60_000, 300_000
			throttled := 0
			for now < start+warmMs+runMs {
				v := c.size(rnd)
				if now >= start+warmMs {
					steady += v
				}
				th := m.Record(set, Produce, "alice", "app", v, now)
				if th > 0 {
					throttled++
				}
				now += th + c.gapMs
			}
			got := steady / (float64(now-start-warmMs) / 1000)
			if dev := math.Abs(got-quota) / quota; dev > c.within {
				t.Fatalf("seed %d: steady rate %.0f B/s against a quota of %.0f (%.1f%% off, %d throttled)", c.seed, got, quota, 100*dev, throttled)
			}
			if throttled == 0 {
				t.Fatalf("seed %d: never throttled", c.seed)
			}
		})
	}
}

// Kafka's Rate: a fresh sensor is measured over at least num-1 windows,
// samples older than the whole window no longer count, and the throttle
// time is (O-Q)/Q * W.
func TestRateWindowAndThrottle(t *testing.T) {
	r := NewRate(DefaultWindow)
	now := int64(1000)
	r.Record(1000, now)
	if w := r.WindowMs(now); w != 10_000 {
		t.Fatalf("window of a fresh rate %d ms, want 10000", w)
	}
	if got := r.Measure(now); got != 100 {
		t.Fatalf("rate %v, want 100/s", got)
	}
	// Quota 50/s: O=100, W=10s: (100-50)/50*10000 = 10000 ms.
	if th := r.ThrottleMs(50, now); th != 10_000 {
		t.Fatalf("throttle %d ms, want 10000", th)
	}
	if th := r.ThrottleMs(100, now); th != 0 {
		t.Fatalf("throttle at the quota %d, want 0", th)
	}
	// Past 11 windows the sample is obsolete.
	if got := r.Measure(now + 11_000); got != 0 {
		t.Fatalf("rate after the window %v, want 0", got)
	}
	// A zero quota throttles as long as an int32 of milliseconds allows.
	r.Record(1, now+11_000)
	if th := r.ThrottleMs(0, now+11_000); th != math.MaxInt32 {
		t.Fatalf("throttle under a zero quota %d", th)
	}
}

// KIP-599's token bucket: a burst of quota * num * size tokens, refilled
// at the quota; strict mutations are refused while it is below zero.
func TestControllerMutationBucket(t *testing.T) {
	m := NewManager(DefaultWindow)
	set, _ := (*Set)(nil).With([]Change{{Entity: Entity{ClientID: DefaultPart}, Set: map[string]float64{ControllerMutationRate: 2}}})
	now := int64(5000)
	// Burst 2 * 11 = 22 partitions; a 30-partition topic is taken (the
	// bucket was not below zero), leaving -8.
	if ok, th := m.Mutation(set, "u", "admin", 30, true, now); !ok || th != 0 {
		t.Fatalf("first mutation: %v %d", ok, th)
	}
	ok, th := m.Mutation(set, "u", "admin", 1, true, now)
	if ok || th != 4000 {
		t.Fatalf("strict mutation below zero: allowed %v, throttle %d (want refused, 4000 ms to refill 8 tokens at 2/s)", ok, th)
	}
	// Another client ID has its own bucket under a client-id default.
	if ok, _ := m.Mutation(set, "u", "other", 1, true, now); !ok {
		t.Fatal("another client refused")
	}
	// Permissive: taken, with the throttle time after.
	if ok, th := m.Mutation(set, "u", "admin", 2, false, now+4000); !ok || th != 1000 {
		t.Fatalf("permissive: %v %d, want taken with 1000 ms", ok, th)
	}
	if ok, _ := m.Mutation(set, "u", "admin", 1, true, now+5000); !ok {
		t.Fatal("refused after the refill")
	}
}

// Kafka's precedence: user+client, user+default client, user, default
// user+client, default user+default client, default user, client,
// default client; and who shares the measured rate.
func TestResolvePrecedence(t *testing.T) {
	u, c := Named("alice"), Named("app")
	levels := []Entity{
		{User: u, ClientID: c},
		{User: u, ClientID: DefaultPart},
		{User: u},
		{User: DefaultPart, ClientID: c},
		{User: DefaultPart, ClientID: DefaultPart},
		{User: DefaultPart},
		{ClientID: c},
		{ClientID: DefaultPart},
	}
	var changes []Change
	for i, e := range levels {
		changes = append(changes, Change{Entity: e, Set: map[string]float64{ProducerByteRate: float64(i + 1)}})
	}
	for i := range levels {
		set, err := (*Set)(nil).With(changes[i:])
		if err != nil {
			t.Fatal(err)
		}
		limit, sk, ok := set.Resolve(ProducerByteRate, "alice", "app")
		if !ok || limit != float64(i+1) {
			t.Fatalf("level %d (%s): got %v %v", i+1, levels[i], limit, ok)
		}
		e := levels[i]
		if sk.HasUser != e.User.Set || sk.HasClientID != e.ClientID.Set ||
			(sk.HasUser && sk.User != "alice") || (sk.HasClientID && sk.ClientID != "app") {
			t.Fatalf("level %d (%s): sensor %+v", i+1, e, sk)
		}
		if _, _, ok := set.Resolve(ConsumerByteRate, "alice", "app"); ok {
			t.Fatal("consumer_byte_rate resolved from producer_byte_rate entities")
		}
	}
	// A quota set for another key on a more specific entity does not
	// hide a less specific one's.
	set, _ := (*Set)(nil).With([]Change{
		{Entity: Entity{User: u, ClientID: c}, Set: map[string]float64{RequestPercentage: 50}},
		{Entity: Entity{ClientID: DefaultPart}, Set: map[string]float64{ProducerByteRate: 7}},
	})
	if limit, _, ok := set.Resolve(ProducerByteRate, "alice", "app"); !ok || limit != 7 {
		t.Fatalf("got %v %v", limit, ok)
	}
}

func TestEntityAndValueChecks(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		types []string
		names []*string
		ok    bool
	}{
		{[]string{"user"}, []*string{s("alice")}, true},
		{[]string{"user", "client-id"}, []*string{nil, s("app")}, true},
		{[]string{"ip"}, []*string{s("10.0.0.1")}, true},
		{[]string{"ip"}, []*string{nil}, true},
		{nil, nil, false},
		{[]string{"user", "user"}, []*string{s("a"), s("b")}, false},
		{[]string{"user"}, []*string{s("")}, false},
		{[]string{"group"}, []*string{s("g")}, false},
		{[]string{"ip", "user"}, []*string{s("10.0.0.1"), s("a")}, false},
		{[]string{"ip"}, []*string{s("not an ip")}, false},
	} {
		_, err := NewEntity(c.types, c.names)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%v %v: %v", c.types, c.names, err)
		}
	}
	user := Entity{User: Named("a")}
	for _, c := range []struct {
		e   Entity
		key string
		v   float64
		ok  bool
	}{
		{user, ProducerByteRate, 1024, true},
		{user, ProducerByteRate, 1024.5, false},
		{user, RequestPercentage, 12.5, true},
		{user, ConnectionCreationRate, 5, false},
		{Entity{IP: DefaultPart}, ConnectionCreationRate, 5, true},
		{Entity{IP: DefaultPart}, ProducerByteRate, 5, false},
		{user, "SCRAM-SHA-256", 1, false},
		{user, ConsumerByteRate, -1, false},
		{user, ConsumerByteRate, math.NaN(), false},
	} {
		if err := CheckValue(c.e, c.key, c.v); (err == nil) != c.ok {
			t.Errorf("%s %s=%v: %v", c.e, c.key, c.v, err)
		}
	}
}

// DescribeClientQuotas' matching, as Kafka's ClientQuotasImage: exact,
// default and specified components, strict and not.
func TestDescribeFilter(t *testing.T) {
	set, err := (*Set)(nil).With([]Change{
		{Entity: Entity{User: Named("alice")}, Set: map[string]float64{ProducerByteRate: 1}},
		{Entity: Entity{User: Named("alice"), ClientID: Named("app")}, Set: map[string]float64{ProducerByteRate: 2}},
		{Entity: Entity{User: DefaultPart}, Set: map[string]float64{ProducerByteRate: 3}},
		{Entity: Entity{ClientID: Named("app")}, Set: map[string]float64{ProducerByteRate: 4}},
		{Entity: Entity{IP: Named("10.0.0.1")}, Set: map[string]float64{ConnectionCreationRate: 5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := func(v string) *string { return &v }
	count := func(f []FilterComponent, strict bool) int {
		t.Helper()
		got, err := set.Describe(f, strict)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for _, c := range []struct {
		f      []FilterComponent
		strict bool
		want   int
	}{
		{nil, false, 5},
		{nil, true, 0},
		{[]FilterComponent{{Type: "user", Match: MatchExact, Name: s("alice")}}, false, 2},
		{[]FilterComponent{{Type: "user", Match: MatchExact, Name: s("alice")}}, true, 1},
		{[]FilterComponent{{Type: "user", Match: MatchDefault}}, false, 1},
		{[]FilterComponent{{Type: "user", Match: MatchSpecified}}, false, 3},
		{[]FilterComponent{{Type: "user", Match: MatchSpecified}}, true, 2},
		{[]FilterComponent{{Type: "client-id", Match: MatchExact, Name: s("app")}}, false, 2},
		{[]FilterComponent{{Type: "user", Match: MatchSpecified}, {Type: "client-id", Match: MatchSpecified}}, true, 1},
		{[]FilterComponent{{Type: "ip", Match: MatchSpecified}}, false, 1},
	} {
		if got := count(c.f, c.strict); got != c.want {
			t.Errorf("%+v strict=%v: %d entities, want %d", c.f, c.strict, got, c.want)
		}
	}
	for _, f := range [][]FilterComponent{
		{{Type: "user", Match: MatchExact}},
		{{Type: "user", Match: MatchDefault, Name: s("x")}},
		{{Type: "user", Match: MatchSpecified}, {Type: "user", Match: MatchDefault}},
		{{Type: "ip", Match: MatchSpecified}, {Type: "user", Match: MatchSpecified}},
		{{Type: "user", Match: 9}},
		{{Type: "", Match: MatchSpecified}},
	} {
		if _, err := set.Describe(f, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", f, err)
		}
	}
	if _, err := set.Describe([]FilterComponent{{Type: "group", Match: MatchSpecified}}, false); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("unknown type: %v", err)
	}
}

// BenchmarkRecord: what a request charged to a quota costs (precedence
// lookup, sensor, record and throttle time), beside a lookup that finds no
// quota for its key.
func BenchmarkRecord(b *testing.B) {
	set, _ := (*Set)(nil).With([]Change{
		{Entity: Entity{User: Named("alice")}, Set: map[string]float64{ProducerByteRate: 1 << 40}},
		{Entity: Entity{ClientID: DefaultPart}, Set: map[string]float64{RequestPercentage: 1e9}},
	})
	m := NewManager(DefaultWindow)
	b.Run("charged", func(b *testing.B) {
		for i := range b.N {
			m.Record(set, Produce, "alice", "app", 1024, int64(i))
		}
	})
	b.Run("no-quota-for-key", func(b *testing.B) {
		for i := range b.N {
			m.Record(set, Fetch, "alice", "app", 1024, int64(i))
		}
	})
}
