package groupconfig

import (
	"errors"
	"testing"
	"time"
)

// TestValidateAsKafka: each case's outcome and message is what Apache
// Kafka 4.4.0 answered to IncrementalAlterConfigs on a GROUP resource
// with its default broker settings (a single KRaft node from
// kafka/.cache/lib, December 2026).
func TestValidateAsKafka(t *testing.T) {
	b := Broker{}.WithDefaults()
	cases := []struct {
		key, value, want string // want "" = accepted
	}{
		{"share.record.lock.duration.ms", "1000", "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."},
		{"share.record.lock.duration.ms", "60001", "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."},
		{"share.record.lock.duration.ms", "abc", "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT"},
		{"share.record.lock.duration.ms", "20000", ""},
		{"share.record.lock.duration.ms", " 20000", ""},
		{"share.record.lock.duration.ms", "+20000", ""},
		{"share.delivery.count.limit", "1", "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"},
		{"share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."},
		{"share.partition.max.record.locks", "99", "Invalid value 99 for configuration share.partition.max.record.locks: Value must be at least 100"},
		{"share.partition.max.record.locks", "4001", "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."},
		{"share.auto.offset.reset", "foo", "Invalid value foo for configuration share.auto.offset.reset: Invalid value `foo` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."},
		{"share.auto.offset.reset", "LATEST", "Invalid value LATEST for configuration share.auto.offset.reset: Invalid value `LATEST` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."},
		{"share.auto.offset.reset", " latest", ""},
		{"share.auto.offset.reset", "earliest", ""},
		{"share.auto.offset.reset", "by_duration:PT1H", ""},
		{"share.auto.offset.reset", "by_duration:pt1h", ""},
		{"share.auto.offset.reset", "by_duration:P1D", ""},
		{"share.auto.offset.reset", "by_duration:+P1D", ""},
		{"share.auto.offset.reset", "by_duration:PT1H-30M", ""},
		{"share.auto.offset.reset", "by_duration:PT0.5S", ""},
		{"share.auto.offset.reset", "by_duration:PT1,5S", ""},
		{"share.auto.offset.reset", "BY_DURATION:PT1H", "Invalid value BY_DURATION:PT1H for configuration share.auto.offset.reset: Invalid value `BY_DURATION:PT1H` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."},
		{"share.auto.offset.reset", "by_duration:-PT1H", "x"},
		{"share.auto.offset.reset", "by_duration:PT-1H30M", "x"},
		{"share.auto.offset.reset", "by_duration:-P1D", "x"},
		{"share.auto.offset.reset", "by_duration:P", "x"},
		{"share.auto.offset.reset", "by_duration:PT", "x"},
		{"share.auto.offset.reset", "by_duration:P1DT", "x"},
		{"share.auto.offset.reset", "by_duration:P2W", "x"},
		{"share.auto.offset.reset", "by_duration: PT1S", "x"},
		{"share.isolation.level", "READ_COMMITTED", "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"},
		{"share.isolation.level", "read_committed", ""},
		{"share.isolation.level", " read_committed", ""},
		{"share.renew.acknowledge.enable", "yes", "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"},
		{"share.renew.acknowledge.enable", "FALSE", ""},
		{"share.renew.acknowledge.enable", " true", ""},
		{"share.session.timeout.ms", "44999", "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{"share.session.timeout.ms", "60001", "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{"share.heartbeat.interval.ms", "4999", "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"share.heartbeat.interval.ms", "15001", "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"consumer.session.timeout.ms", "44999", "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{"consumer.session.timeout.ms", "50000", ""},
		{"consumer.heartbeat.interval.ms", "16000", "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"bogus.config", "1", "Unknown group config name: bogus.config"},
		{"streams.session.timeout.ms", "45000", "group config streams.session.timeout.ms is not supported by Strata"},
		// KIP-1191 (Kafka 4.4): internal names refused, any other stored
		// (the prefix is checked when a dead letter is written).
		{"errors.deadletterqueue.topic.name", "__consumer_offsets", "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"},
		{"errors.deadletterqueue.topic.name", "dlq.orders", ""},
		{"errors.deadletterqueue.topic.name", "", ""},
		{"errors.deadletterqueue.copy.record.enable", "maybe", "Invalid value maybe for configuration errors.deadletterqueue.copy.record.enable: Expected value to be either true or false"},
		{"errors.deadletterqueue.copy.record.enable", "true", ""},
		// Strata's delayed redelivery.
		{"strata.share.redelivery.backoff.initial.ms", "1000", ""},
		{"strata.share.redelivery.backoff.initial.ms", "-1", "Invalid value -1 for configuration strata.share.redelivery.backoff.initial.ms: Value must be at least 0"},
		{"strata.share.redelivery.backoff.multiplier", "1.5", ""},
		{"strata.share.redelivery.backoff.multiplier", "0.5", "Invalid value 0.5 for configuration strata.share.redelivery.backoff.multiplier: Value must be between 1 and 1000"},
		{"strata.share.redelivery.backoff.jitter", "0.25", ""},
		{"strata.share.redelivery.backoff.jitter", "0", ""},
		{"strata.share.redelivery.backoff.jitter", "1.5", "Invalid value 1.5 for configuration strata.share.redelivery.backoff.jitter: Value must be between 0 and 1"},
	}
	for _, c := range cases {
		err := Validate(map[string]string{c.key: c.value}, b)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%q: %v, want accepted", c.key, c.value, err)
		case c.want != "" && !errors.Is(err, ErrInvalidConfig):
			t.Errorf("%s=%q: %v, want INVALID_CONFIG", c.key, c.value, err)
		case c.want != "" && c.want != "x" && err.Error() != c.want:
			t.Errorf("%s=%q:\n got %s\nwant %s", c.key, c.value, err, c.want)
		}
	}
}

// TestCheckAsKafka: Kafka's cross-checks of the broker settings (its
// ShareGroupConfig and GroupCoordinatorConfig constructors), and the way
// tests reach 1-2 s locks and sessions: by lowering the min.* settings.
func TestCheckAsKafka(t *testing.T) {
	cases := []struct {
		mod  func(*Broker)
		want string
	}{
		{func(b *Broker) { b.ShareRecordLockDuration = time.Second }, "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{func(b *Broker) { b.ShareRecordLockDuration, b.ShareMinRecordLockDuration = time.Second, time.Second }, ""},
		{func(b *Broker) { b.ShareRecordLockDuration = 70 * time.Second }, "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"},
		{func(b *Broker) { b.SharePartitionMaxRecordLocks = 5000 }, "group.share.max.partition.max.record.locks must be greater than or equal to group.share.partition.max.record.locks"},
		{func(b *Broker) { b.ShareSessionTimeout = time.Second }, "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"},
		{func(b *Broker) { b.ShareSessionTimeout, b.ShareMinSessionTimeout = time.Second, time.Second }, "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"},
		{func(b *Broker) {
			b.ShareSessionTimeout, b.ShareMinSessionTimeout = time.Second, time.Second
			b.ShareHeartbeatInterval, b.ShareMinHeartbeatInterval = 500*time.Millisecond, 500*time.Millisecond
		}, ""},
		{func(b *Broker) { b.ShareHeartbeatInterval = 45 * time.Second }, "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"},
		{func(b *Broker) { b.ShareHeartbeatInterval = 4 * time.Second }, "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"},
		{func(b *Broker) { b.ShareMinSessionTimeout = 70 * time.Second }, "group.share.max.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"},
		{func(b *Broker) { b.ConsumerSessionTimeout = time.Second }, "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{func(b *Broker) { b.ConsumerHeartbeatInterval = time.Second }, "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"},
		{func(b *Broker) {
			b.ConsumerHeartbeatInterval, b.ConsumerMinHeartbeatInterval = time.Second, time.Second
		}, ""},
	}
	for i, c := range cases {
		b := Broker{}.WithDefaults()
		c.mod(&b)
		err := b.Check()
		if (c.want == "") != (err == nil) || (err != nil && (err.Error() != c.want || !errors.Is(err, ErrInvalidConfig))) {
			t.Errorf("case %d: %v, want %q", i, err, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	b := Broker{ShareMinRecordLockDuration: time.Second, ShareRecordLockDuration: 2 * time.Second}.WithDefaults()
	if e := Resolve(nil, b); e.RecordLockDuration != 2*time.Second || e.DeliveryCountLimit != 5 || e.PartitionMaxRecordLocks != 2000 ||
		e.AutoOffsetReset.Kind != ResetLatest || e.ReadCommitted || !e.RenewAcknowledgeEnable || !e.RecordHeaders || e.ShareSessionTimeout != 45*time.Second ||
		e.RedriveLimit != 3 {
		t.Fatalf("defaults: %+v", e)
	}
	e := Resolve(map[string]string{
		ShareRecordLockDurationMs: "1500", ShareDeliveryCountLimit: "3", SharePartitionMaxRecordLocks: "100",
		ShareAutoOffsetReset: "by_duration:PT1M", ShareIsolationLevel: "read_committed", ShareRenewAcknowledgeEnable: "false",
		ShareSessionTimeoutMs: "50000", ShareHeartbeatIntervalMs: "6000", ConsumerSessionTimeoutMs: "46000", ConsumerHeartbeatIntervalMs: "7000",
		DLQTopicName: " dlq.jobs", DLQCopyRecordEnable: "true",
		BackoffInitialMs: "500", BackoffMultiplier: "1.5", BackoffJitter: "0.2", RecordHeadersEnable: "false",
		RedriveLimit: "7",
	}, b)
	want := Effective{RecordLockDuration: 1500 * time.Millisecond, DeliveryCountLimit: 3, PartitionMaxRecordLocks: 100,
		AutoOffsetReset: AutoOffsetReset{Kind: ResetByDuration, DurationMs: 60000}, ReadCommitted: true, RenewAcknowledgeEnable: false,
		DLQTopicName: "dlq.jobs", DLQCopyRecordEnable: true,
		BackoffInitial: 500 * time.Millisecond, BackoffMax: time.Minute, BackoffMultiplier: 1.5, BackoffJitter: 0.2, RedriveLimit: 7,
		ShareSessionTimeout: 50 * time.Second, ShareHeartbeatInterval: 6 * time.Second, ConsumerSessionTimeout: 46 * time.Second, ConsumerHeartbeatInterval: 7 * time.Second}
	if e != want {
		t.Fatalf("overrides:\n got %+v\nwant %+v", e, want)
	}
	// Narrower bounds after a restart clamp a stored value.
	if e := Resolve(map[string]string{ShareRecordLockDurationMs: "500000"}, b); e.RecordLockDuration != b.ShareMaxRecordLockDuration {
		t.Fatalf("clamp: %v", e.RecordLockDuration)
	}
	if got := (AutoOffsetReset{Kind: ResetByDuration, DurationMs: 60000}).Timestamp(100000); got != 40000 {
		t.Fatalf("timestamp %d", got)
	}
	if n := testing.AllocsPerRun(100, func() { Resolve(map[string]string{ShareRecordLockDurationMs: "1500"}, b) }); n != 0 {
		t.Fatalf("Resolve allocates %v times", n)
	}
}

func TestParseISODuration(t *testing.T) {
	for s, want := range map[string]int64{
		"PT1H": 3600000, "pt1h": 3600000, "P1D": 86400000, "PT1H-30M": 1800000, "PT-1H30M": -1800000, "PT0.5S": 500,
		"PT1,5S": 1500, "-PT1S": -1000, "+P1D": 86400000, "P1DT2H3M4.005S": 93784005, "PT-0.5S": -500, "PT0.123456789S": 123,
		"PT1.S": 1000, "P-1D": -86400000, "p1dt1h1m1s": 90061000, "PT1M1S": 61000,
	} {
		if got, ok := ParseISODuration(s); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "P", "PT", "P1DT", "P2W", "P1Y", "1H", "PT1.1234567890S", "P99999999999999999999D", "PT 1S",
		"PT1.5H", "PT1S1M", "PT1H1H", "P1D1D", "PT1", "P1", "PTS", "PT.5S", "xP1D", "P1DX", "PT1HX"} {
		if got, ok := ParseISODuration(s); ok {
			t.Errorf("%q parsed as %d", s, got)
		}
	}
}

// TestDescribeAsKafka: sources and synonyms as Kafka 4.4 describes a
// GROUP resource (with group.share.delivery.count.limit=4 in its
// server.properties and share.delivery.count.limit=3 set on the group).
func TestDescribeAsKafka(t *testing.T) {
	b := Broker{ShareDeliveryCountLimit: 4, Explicit: map[string]bool{"group.share.delivery.count.limit": true}}.WithDefaults()
	find := func(es []Entry, name string) Entry {
		for _, e := range es {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("%s not described", name)
		return Entry{}
	}
	plain := Describe(nil, b)
	if len(plain) != len(Defs) {
		t.Fatalf("%d entries", len(plain))
	}
	if e := find(plain, ShareDeliveryCountLimit); e.Value != "4" || e.Source != SourceStaticBroker ||
		len(e.Synonyms) != 2 || e.Synonyms[0] != (Synonym{"group.share.delivery.count.limit", "4", SourceStaticBroker}) || e.Synonyms[1] != (Synonym{"group.share.delivery.count.limit", "5", SourceDefault}) {
		t.Fatalf("static: %+v", e)
	}
	if e := find(plain, ShareRecordLockDurationMs); e.Value != "30000" || e.Source != SourceDefault || e.Type != TypeInt ||
		len(e.Synonyms) != 1 || e.Synonyms[0] != (Synonym{"group.share.record.lock.duration.ms", "30000", SourceDefault}) {
		t.Fatalf("default: %+v", e)
	}
	if e := find(plain, ShareRenewAcknowledgeEnable); e.Value != "true" || e.Type != TypeBoolean || e.Synonyms[0] != (Synonym{ShareRenewAcknowledgeEnable, "true", SourceDefault}) {
		t.Fatalf("fixed default: %+v", e)
	}
	set := Describe(map[string]string{ShareDeliveryCountLimit: "3"}, b)
	if e := find(set, ShareDeliveryCountLimit); e.Value != "3" || e.Source != SourceGroup || len(e.Synonyms) != 3 || e.Synonyms[0] != (Synonym{ShareDeliveryCountLimit, "3", SourceGroup}) {
		t.Fatalf("group: %+v", e)
	}
}

// BenchmarkResolve is the per-request cost of a share group's settings:
// no overrides (the common case) and three.
func BenchmarkResolve(b *testing.B) {
	br := Broker{}.WithDefaults()
	three := map[string]string{ShareRecordLockDurationMs: "20000", ShareDeliveryCountLimit: "3", ShareAutoOffsetReset: "by_duration:PT1H"}
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			Resolve(nil, br)
		}
	})
	b.Run("three", func(b *testing.B) {
		for b.Loop() {
			Resolve(three, br)
		}
	})
}

// FuzzValidate: no input panics, and what Validate accepts Resolve reads
// back within the broker's bounds.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"PT1H", "by_duration:P1DT2H3M4.5S", "-PT-1S", "30000", " true", "read_committed"} {
		f.Add(ShareAutoOffsetReset, s)
		f.Add(ShareRecordLockDurationMs, s)
	}
	b := Broker{}.WithDefaults()
	f.Fuzz(func(t *testing.T, key, value string) {
		ParseISODuration(value)
		set := map[string]string{key: value}
		if Validate(set, b) != nil {
			return
		}
		e := Resolve(set, b)
		if e.RecordLockDuration < b.ShareMinRecordLockDuration || e.RecordLockDuration > b.ShareMaxRecordLockDuration || e.AutoOffsetReset.DurationMs < 0 {
			t.Fatalf("%s=%q resolved to %+v", key, value, e)
		}
	})
}
