package retention

import (
	"errors"
	"reflect"
	"testing"
)

func testLayers() []Layer {
	return []Layer{
		{Props: map[string]string{"log.retention.ms": "1000"}, Source: SourceDynamicBroker},
		{Props: map[string]string{"log.retention.ms": "2000", "log.segment.bytes": "4096"}, Source: SourceDynamicDefaultBroker},
		{Props: map[string]string{"log.retention.hours": "2", "log.segment.bytes": "8192"}, Source: SourceStaticBroker},
	}
}

func TestMergeHighestLayerWins(t *testing.T) {
	got := Merge(testLayers())
	want := map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "4096", "log.retention.hours": "2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestDescribeTopicLayersSourcesAndOrder(t *testing.T) {
	entries, err := DescribeTopicLayers(nil, testLayers())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Entry{}
	for _, e := range entries {
		by[e.Name] = e
	}
	r := by["retention.ms"]
	if r.Value != "1000" || r.Source != SourceDynamicBroker {
		t.Fatalf("retention.ms %+v", r)
	}
	wantSyn := []EntrySynonym{
		{"log.retention.ms", "1000", SourceDynamicBroker},
		{"log.retention.ms", "2000", SourceDynamicDefaultBroker},
		{"log.retention.hours", "2", SourceStaticBroker},
		{"log.retention.hours", "168", SourceDefault},
	}
	if !reflect.DeepEqual(r.Synonyms, wantSyn) {
		t.Fatalf("synonyms %+v", r.Synonyms)
	}
	if s := by["segment.bytes"]; s.Value != "4096" || s.Source != SourceDynamicDefaultBroker {
		t.Fatalf("segment.bytes %+v", s)
	}
	// A static log.retention.ms beats a dynamic log.retention.hours
	// (synonym priority over the merged layers), and the source says so.
	entries, err = DescribeTopicLayers(nil, []Layer{
		{Props: map[string]string{"log.retention.hours": "1"}, Source: SourceDynamicBroker},
		{Props: map[string]string{"log.retention.ms": "5"}, Source: SourceStaticBroker},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "retention.ms" && (e.Value != "5" || e.Source != SourceStaticBroker) {
			t.Fatalf("retention.ms %+v", e)
		}
	}
}

func TestDescribeBrokerLayersDropsHigherSynonyms(t *testing.T) {
	by := map[string]Entry{}
	for _, e := range DescribeBrokerLayers(testLayers()) {
		by[e.Name] = e
	}
	ms := by["log.retention.ms"]
	if ms.Value != "1000" || ms.Source != SourceDynamicBroker || ms.ReadOnly {
		t.Fatalf("log.retention.ms %+v", ms)
	}
	want := []EntrySynonym{
		{"log.retention.ms", "1000", SourceDynamicBroker},
		{"log.retention.ms", "2000", SourceDynamicDefaultBroker},
		{"log.retention.hours", "2", SourceStaticBroker},
		{"log.retention.hours", "168", SourceDefault},
	}
	if !reflect.DeepEqual(ms.Synonyms, want) {
		t.Fatalf("log.retention.ms synonyms %+v", ms.Synonyms)
	}
	h := by["log.retention.hours"]
	want = []EntrySynonym{{"log.retention.hours", "2", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}
	if h.Value != "2" || h.Source != SourceStaticBroker || !h.ReadOnly || !reflect.DeepEqual(h.Synonyms, want) {
		t.Fatalf("log.retention.hours %+v", h)
	}
	// .minutes is unset, and no synonym of its own name is set below the
	// higher log.retention.ms: nothing is left once those are dropped.
	if m := by["log.retention.minutes"]; m.Value != "" || m.Source != SourceDefault || len(m.Synonyms) != 0 {
		t.Fatalf("log.retention.minutes %+v", m)
	}
}

func TestDescribeBrokerLayersCleanerSettings(t *testing.T) {
	by := map[string]Entry{}
	for _, e := range DescribeBrokerLayers([]Layer{
		{Props: map[string]string{"log.cleaner.backoff.ms": "50"}, Source: SourceDynamicDefaultBroker},
		{Props: map[string]string{"log.cleaner.backoff.ms": "1000", "log.cleaner.enable": "false"}, Source: SourceStaticBroker},
	}) {
		by[e.Name] = e
	}
	b := by["log.cleaner.backoff.ms"]
	want := []EntrySynonym{{"log.cleaner.backoff.ms", "50", SourceDynamicDefaultBroker}, {"log.cleaner.backoff.ms", "1000", SourceStaticBroker},
		{"log.cleaner.backoff.ms", "15000", SourceDefault}}
	if b.Value != "50" || b.Source != SourceDynamicDefaultBroker || b.ReadOnly || b.Type != TypeLong || !reflect.DeepEqual(b.Synonyms, want) {
		t.Fatalf("log.cleaner.backoff.ms %+v", b)
	}
	if e := by["log.cleaner.enable"]; e.Value != "false" || e.Source != SourceStaticBroker || !e.ReadOnly || e.Type != TypeBoolean {
		t.Fatalf("log.cleaner.enable %+v", e)
	}
	if e := by["log.retention.check.interval.ms"]; e.Value != "300000" || e.Source != SourceDefault || !e.ReadOnly {
		t.Fatalf("log.retention.check.interval.ms %+v", e)
	}
}

func TestValidateDynamicBroker(t *testing.T) {
	static := []Layer{{Props: map[string]string{"log.cleaner.min.compaction.lag.ms": "100"}, Source: SourceStaticBroker}}
	for _, tc := range []struct {
		set  map[string]string
		want error
	}{
		{map[string]string{"log.retention.ms": "1000", "message.max.bytes": "5000"}, nil},
		{map[string]string{"log.retention.hours": "1"}, ErrUnknownConfig}, // not dynamic in Kafka either
		{map[string]string{"node.id": "3"}, ErrUnknownConfig},
		{map[string]string{"log.retention.ms": "soon"}, ErrInvalidValue},
		{map[string]string{"log.segment.bytes": "1"}, ErrInvalidValue},
		{map[string]string{"log.cleaner.max.compaction.lag.ms": "10"}, ErrInvalidValue}, // below the static min lag
		{map[string]string{"log.cleaner.backoff.ms": "100"}, nil},
		{map[string]string{"log.cleaner.backoff.ms": "-5"}, ErrInvalidValue},
		{map[string]string{"log.cleaner.enable": "false"}, ErrUnknownConfig},
		{map[string]string{"log.retention.check.interval.ms": "1000"}, ErrUnknownConfig},
	} {
		if err := ValidateDynamicBroker(tc.set, static); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%v: got %v want %v", tc.set, err, tc.want)
		}
	}
}
