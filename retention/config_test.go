package retention

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateTopic(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		wantErr error
		wantKey string // must appear in the message
	}{
		{"empty", nil, nil, ""},
		{"all good", map[string]string{"retention.ms": "-1", "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1",
			"unclean.leader.election.enable": "TRUE", "compression.type": "zstd", "segment.bytes": "1024"}, nil, ""},
		{"unknown key", map[string]string{"retention.msx": "1"}, ErrUnknownConfig, "retention.msx"},
		{"broker key on topic", map[string]string{"log.retention.hours": "1"}, ErrUnknownConfig, "log.retention.hours"},
		{"not a long", map[string]string{"retention.ms": "abc"}, ErrInvalidValue, "retention.ms"},
		{"int overflow", map[string]string{"segment.bytes": "4294967296"}, ErrInvalidValue, "segment.bytes"},
		{"below min", map[string]string{"segment.bytes": "13"}, ErrInvalidValue, "segment.bytes"},
		{"retention below -1", map[string]string{"retention.ms": "-2"}, ErrInvalidValue, "retention.ms"},
		{"segment.ms zero", map[string]string{"segment.ms": "0"}, ErrInvalidValue, "segment.ms"},
		{"ratio above 1", map[string]string{"min.cleanable.dirty.ratio": "1.5"}, ErrInvalidValue, "min.cleanable.dirty.ratio"},
		{"ratio NaN", map[string]string{"min.cleanable.dirty.ratio": "NaN"}, ErrInvalidValue, "min.cleanable.dirty.ratio"},
		{"bad bool", map[string]string{"preallocate": "yes"}, ErrInvalidValue, "preallocate"},
		{"bad enum", map[string]string{"message.timestamp.type": "createtime"}, ErrInvalidValue, "message.timestamp.type"},
		{"bad list elem", map[string]string{"cleanup.policy": "delete,keep"}, ErrInvalidValue, "cleanup.policy"},
		{"empty list", map[string]string{"cleanup.policy": ""}, ErrInvalidValue, "cleanup.policy"},
		{"compaction lags", map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, ErrInvalidValue, "min.compaction.lag.ms"},
		{"gzip level", map[string]string{"compression.gzip.level": "0"}, ErrInvalidValue, "compression.gzip.level"},
		{"zstd negative ok", map[string]string{"compression.zstd.level": "-5"}, nil, ""},
		{"huge value", map[string]string{"compression.type": strings.Repeat("x", maxValueLen+1)}, ErrInvalidValue, "compression.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTopic(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("error %q does not name %q", err, tt.wantKey)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		broker    map[string]string
		key       string
		want      string
		source    Source
		from      string
	}{
		{"default", nil, nil, "retention.ms", "604800000", SourceDefault, "retention.ms"},
		{"hours", nil, map[string]string{"log.retention.hours": "1"}, "retention.ms", "3600000", SourceStaticBroker, "log.retention.hours"},
		{"minutes beat hours", nil, map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, "retention.ms", "120000", SourceStaticBroker, "log.retention.minutes"},
		{"ms beat minutes", nil, map[string]string{"log.retention.ms": "5", "log.retention.minutes": "2"}, "retention.ms", "5", SourceStaticBroker, "log.retention.ms"},
		{"unlimited hours", nil, map[string]string{"log.retention.hours": "-1"}, "retention.ms", "-1", SourceStaticBroker, "log.retention.hours"},
		{"topic beats broker", map[string]string{"retention.ms": "7"}, map[string]string{"log.retention.ms": "5"}, "retention.ms", "7", SourceDynamicTopic, "retention.ms"},
		{"roll hours", nil, map[string]string{"log.roll.hours": "2"}, "segment.ms", "7200000", SourceStaticBroker, "log.roll.hours"},
		{"message.max.bytes", nil, map[string]string{"message.max.bytes": "2000"}, "max.message.bytes", "2000", SourceStaticBroker, "message.max.bytes"},
		{"flush interval", nil, map[string]string{"log.flush.interval.messages": "1"}, "flush.messages", "1", SourceStaticBroker, "log.flush.interval.messages"},
		{"unrelated broker key ignored", nil, map[string]string{"node.id": "x"}, "segment.bytes", "1073741824", SourceDefault, "segment.bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := Resolve(tt.overrides, tt.broker)
			if err != nil {
				t.Fatal(err)
			}
			got := vals[tt.key]
			if got.Value != tt.want || got.Source != tt.source || got.From != tt.from {
				t.Fatalf("%s = %+v, want %s from %s (source %d)", tt.key, got, tt.want, tt.from, tt.source)
			}
		})
	}
}

func TestBrokerSettingErrors(t *testing.T) {
	tests := []struct {
		props   map[string]string
		wantErr error
		key     string
	}{
		{map[string]string{"log.retention.hours": "x"}, ErrInvalidValue, "log.retention.hours"},
		{map[string]string{"log.roll.hours": "0"}, ErrInvalidValue, "log.roll.hours"},
		{map[string]string{"log.retention.hours": "9223372036854775"}, ErrInvalidValue, "log.retention.hours"},
		{map[string]string{"log.segment.bytes": "10"}, ErrInvalidValue, "log.segment.bytes"},
		{map[string]string{"log.cleanup.policy": "forever"}, ErrInvalidValue, "log.cleanup.policy"},
		{map[string]string{"node.id": "whatever", "log.segment.bytes": "1048576"}, nil, ""},
	}
	for _, tt := range tests {
		err := ValidateBroker(tt.props)
		if tt.wantErr == nil {
			if err != nil {
				t.Errorf("%v: %v", tt.props, err)
			}
			continue
		}
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%v: err = %v, want %v naming %s", tt.props, err, tt.wantErr, tt.key)
		}
		if _, err := Resolve(nil, tt.props); err == nil {
			t.Errorf("%v: Resolve accepted an invalid broker setting", tt.props)
		}
	}
	if err := ValidateBrokerSetting("node.id", "1"); !errors.Is(err, ErrUnknownConfig) {
		t.Errorf("node.id: err = %v", err)
	}
}

func TestLogConfig(t *testing.T) {
	cfg, err := LogConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SegmentBytes != 1<<30 || cfg.SegmentMs != 7*24*time.Hour || cfg.SegmentIndexBytes != 10<<20 ||
		cfg.IndexIntervalBytes != 4096 || cfg.MaxMessageBytes != 1048588 || cfg.MessageTimestampType != "CreateTime" ||
		cfg.FlushInterval != 0 || cfg.TimestampBeforeMaxMs != 0 || cfg.TimestampAfterMaxMs != 3600000 {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg, err = LogConfig(map[string]string{"segment.bytes": "2048", "flush.ms": "100", "message.timestamp.type": "LogAppendTime",
		"message.timestamp.before.max.ms": "0"}, map[string]string{"log.roll.ms": "1000", "log.segment.bytes": "999999", "message.max.bytes": "4096"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SegmentBytes != 2048 || cfg.SegmentMs != time.Second || cfg.FlushInterval != 100*time.Millisecond ||
		cfg.MaxMessageBytes != 4096 || cfg.MessageTimestampType != "LogAppendTime" || cfg.TimestampBeforeMaxMs != 1 {
		t.Fatalf("overrides: %+v", cfg)
	}
	if _, err := LogConfig(map[string]string{"segment.bytes": "x"}, nil); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("invalid override: %v", err)
	}
}

func TestDescribeTopic(t *testing.T) {
	entries, err := DescribeTopic(map[string]string{"retention.ms": "1000"}, map[string]string{"log.retention.hours": "2", "log.segment.bytes": "4096"})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(defs) {
		t.Fatalf("%d entries, want %d", len(entries), len(defs))
	}
	byName := map[string]Entry{}
	for i, e := range entries {
		if i > 0 && entries[i-1].Name >= e.Name {
			t.Fatalf("not sorted at %s", e.Name)
		}
		byName[e.Name] = e
	}
	r := byName["retention.ms"]
	if r.Value != "1000" || r.Source != SourceDynamicTopic || r.Type != TypeLong || r.Doc == "" {
		t.Fatalf("retention.ms: %+v", r)
	}
	wantSyn := []EntrySynonym{{"retention.ms", "1000", SourceDynamicTopic}, {"log.retention.hours", "2", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}
	if len(r.Synonyms) != len(wantSyn) {
		t.Fatalf("synonyms: %+v", r.Synonyms)
	}
	for i := range wantSyn {
		if r.Synonyms[i] != wantSyn[i] {
			t.Fatalf("synonym %d: %+v, want %+v", i, r.Synonyms[i], wantSyn[i])
		}
	}
	s := byName["segment.bytes"]
	if s.Value != "4096" || s.Source != SourceStaticBroker {
		t.Fatalf("segment.bytes: %+v", s)
	}
	c := byName["cleanup.policy"]
	if c.Value != "delete" || c.Source != SourceDefault || c.Type != TypeList {
		t.Fatalf("cleanup.policy: %+v", c)
	}
}

func TestDescribeBroker(t *testing.T) {
	entries := DescribeBroker(map[string]string{"log.retention.hours": "5"})
	found := 0
	for _, e := range entries {
		switch e.Name {
		case "log.retention.hours":
			found++
			// Static only, as in Kafka: log.retention.ms is the dynamic one.
			if e.Value != "5" || e.Source != SourceStaticBroker || !e.ReadOnly || e.Type != TypeInt {
				t.Fatalf("%+v", e)
			}
		case "log.retention.ms":
			found++
			if e.Value != "" || e.Source != SourceDefault || e.ReadOnly {
				t.Fatalf("%+v", e)
			}
		case "message.max.bytes":
			found++
			if e.Value != "1048588" {
				t.Fatalf("%+v", e)
			}
		}
	}
	if found != 3 {
		t.Fatalf("found %d of 3", found)
	}
}

func TestRequiredConfigsPresent(t *testing.T) {
	for _, n := range []string{"cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
		"flush.ms", "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.type",
		"message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
		"min.insync.replicas", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
		"segment.ms", "unclean.leader.election.enable"} {
		d, ok := Lookup(n)
		if !ok {
			t.Errorf("%s missing", n)
			continue
		}
		// Every default must pass its own validation.
		if err := ValidateTopic(map[string]string{n: d.Default}); err != nil {
			t.Errorf("%s default: %v", n, err)
		}
	}
	for _, n := range []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.segment.bytes", "log.roll.ms",
		"log.roll.hours", "message.max.bytes", "log.flush.interval.messages", "log.flush.interval.ms", "log.index.interval.bytes"} {
		if !IsBrokerSetting(n) {
			t.Errorf("broker setting %s missing", n)
		}
	}
}
