package replication

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/retention"
)

func TestSetBrokerConfigsApply(t *testing.T) {
	im := newImage()
	im = mustApply(t, im, Command{Type: CmdSetBrokerConfigs, ConfigResource: "1", Configs: map[string]string{"log.retention.ms": "5"}})
	prev := im
	im = mustApply(t, im, Command{Type: CmdSetBrokerConfigs, ConfigResource: "", Configs: map[string]string{"log.segment.bytes": "4096"}})
	if prev.brokerConfigs[""] != nil || im.brokerConfigs["1"]["log.retention.ms"] != "5" || im.brokerConfigs[""]["log.segment.bytes"] != "4096" {
		t.Fatalf("images: prev %v next %v", prev.brokerConfigs, im.brokerConfigs)
	}
	// An empty set removes the resource.
	im = mustApply(t, im, Command{Type: CmdSetBrokerConfigs, ConfigResource: "1"})
	if _, ok := im.brokerConfigs["1"]; ok {
		t.Fatalf("resource 1 not removed: %v", im.brokerConfigs)
	}
	for _, res := range []string{"x", "-1", "01", "+1", "99999999999"} {
		if _, err := im.Apply(Command{Type: CmdSetBrokerConfigs, ConfigResource: res, Configs: map[string]string{"a": "b"}}); !errors.Is(err, errRejected) {
			t.Errorf("resource %q: %v", res, err)
		}
	}
}

// TestBrokerConfigsTakeEffectAndSurviveRestart: a dynamic
// message.max.bytes reaches a live partition at once (a topic override
// still wins), is described with its source, and is applied again at open
// after a restart.
func TestBrokerConfigsTakeEffectAndSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	for _, req := range []CreateTopicRequest{
		{Name: "plain", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "own", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"max.message.bytes": "100000"}},
	} {
		if _, err := b.CreateTopic(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	big := func() []byte { return batch(20, -1, -1, -1) }
	for _, tc := range []struct {
		res  string
		set  map[string]string
		want error
	}{
		{"1", map[string]string{"num.partitions": "3"}, ErrReadOnlyConfig},
		{"1", map[string]string{"log.retention.hours": "3"}, ErrReadOnlyConfig},
		{"1", map[string]string{"message.max.bytes": "big"}, ErrInvalidConfig},
		{"1", map[string]string{"whatever": "1"}, ErrInvalidConfig},
		{"one", map[string]string{"message.max.bytes": "64"}, ErrInvalidBrokerResource},
	} {
		if err := b.SetBrokerConfigs(ctx, tc.res, tc.set, false); !errors.Is(err, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.res, tc.set, err, tc.want)
		}
	}
	if err := b.SetBrokerConfigs(ctx, "1", map[string]string{"message.max.bytes": "64"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "plain", 0, big()); err != nil {
		t.Fatalf("validate-only changed the config: %v", err)
	}
	if err := b.SetBrokerConfigs(ctx, "1", map[string]string{"message.max.bytes": "64"}, false); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if _, err := b.Produce(ctx, "plain", 0, big()); !errors.Is(err, log.ErrBatchTooLarge) {
			t.Fatalf("%s: big batch after message.max.bytes=64: %v", when, err)
		}
		if _, err := b.Produce(ctx, "own", 0, big()); err != nil {
			t.Fatalf("%s: topic override lost to the broker config: %v", when, err)
		}
		var found bool
		for _, e := range b.BrokerConfigEntries() {
			if e.Name == "message.max.bytes" {
				found = true
				if e.Value == nil || *e.Value != "64" || e.Source != int8(retention.SourceDynamicBroker) || e.ReadOnly {
					t.Fatalf("%s: %+v", when, e)
				}
			}
		}
		if !found {
			t.Fatalf("%s: message.max.bytes not described", when)
		}
	}
	check("live")
	b.Close()
	b = startBroker(t, testConfig(dir))
	defer b.Close()
	check("after restart")
	// Cluster default below the per-broker value; removing the latter
	// lets the former apply.
	if err := b.SetBrokerConfigs(ctx, "", map[string]string{"message.max.bytes": "100000"}, false); err != nil {
		t.Fatal(err)
	}
	check("with a default below")
	if d := b.BrokerDefaultConfigEntries(); len(d) != 1 || d[0].Name != "message.max.bytes" || d[0].Source != int8(retention.SourceDynamicDefaultBroker) {
		t.Fatalf("default entries: %+v", d)
	}
	if err := b.SetBrokerConfigs(ctx, "1", nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "plain", 0, big()); err != nil {
		t.Fatalf("after removing the per-broker value: %v", err)
	}
}

// TestBrokerConfigsAcrossQuorum: a cluster-wide default set through any
// broker reaches the partitions of every broker; a per-broker value only
// those of its broker.
func TestBrokerConfigsAcrossQuorum(t *testing.T) {
	ctx := context.Background()
	q := newTestQuorum(t)
	ctl := q.controller()
	follower := (ctl + 1) % 3
	for i, b := range q.brokers { // every broker's image has every registration
		testwait.For(t, 30*time.Second, func() bool { return len(b.Brokers()) == 3 }, "broker %d sees three brokers registered", i+1)
	}
	if _, err := q.brokers[follower].CreateTopic(ctx, CreateTopicRequest{Name: "dyn", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range q.brokers {
		q.waitTopic(i, "dyn")
	}
	// maxMessageBytes waits until every local log of broker i has want.
	wait := func(i int, want int32) {
		t.Helper()
		testwait.For(t, 10*time.Second, func() bool {
			ok, n := true, 0
			for p := int32(0); p < 3; p++ {
				if lp := q.brokers[i].LocalLog("dyn", p); lp != nil {
					n++
					if lp.Config().MaxMessageBytes != want {
						ok = false
					}
				}
			}
			return ok && n > 0
		}, "broker %d: max.message.bytes never became %d", i+1, want)
	}
	if err := q.brokers[follower].SetBrokerConfigs(ctx, "", map[string]string{"message.max.bytes": "5000"}, false); err != nil {
		t.Fatal(err)
	}
	for i := range q.brokers {
		wait(i, 5000)
	}
	target := (follower + 1) % 3
	if err := q.brokers[follower].SetBrokerConfigs(ctx, strconv.Itoa(target+1), map[string]string{"message.max.bytes": "7000"}, false); err != nil {
		t.Fatal(err)
	}
	wait(target, 7000)
	for i := range q.brokers {
		if i != target {
			wait(i, 5000)
		}
	}
}
