package replication

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
)

// TestGroupConfigsAndFeaturesApply: the commands replace a group's set
// (empty removes it), leave the previous image alone, refuse what is out
// of bounds, and travel in a snapshot with the feature levels and their
// epoch.
func TestGroupConfigsAndFeaturesApply(t *testing.T) {
	im := newImage()
	im = mustApply(t, im, Command{Type: CmdSetGroupConfigs, ConfigResource: "g1", Configs: map[string]string{"share.delivery.count.limit": "3"}})
	prev := im
	im = mustApply(t, im, Command{Type: CmdSetGroupConfigs, ConfigResource: "g2", Configs: map[string]string{"share.isolation.level": "read_committed"}})
	if prev.groupConfigs["g2"] != nil || im.groupConfigs["g1"]["share.delivery.count.limit"] != "3" || len(im.groupConfigs) != 2 {
		t.Fatalf("images: prev %v next %v", prev.groupConfigs, im.groupConfigs)
	}
	im = mustApply(t, im, Command{Type: CmdSetGroupConfigs, ConfigResource: "g2"})
	if _, ok := im.groupConfigs["g2"]; ok {
		t.Fatalf("g2 not removed: %v", im.groupConfigs)
	}
	big := map[string]string{}
	for i := 0; i <= maxGroupConfigsPerGroup; i++ {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "1"
	}
	for name, c := range map[string]Command{
		"empty group":     {Type: CmdSetGroupConfigs, Configs: map[string]string{"a": "b"}},
		"too many":        {Type: CmdSetGroupConfigs, ConfigResource: "g", Configs: big},
		"empty key":       {Type: CmdSetGroupConfigs, ConfigResource: "g", Configs: map[string]string{"": "b"}},
		"no features":     {Type: CmdSetFeatures},
		"negative level":  {Type: CmdSetFeatures, Features: map[string]int16{"share.version": -1}},
		"unnamed feature": {Type: CmdSetFeatures, Features: map[string]int16{"": 1}},
	} {
		if _, err := im.Apply(c); !errors.Is(err, errRejected) {
			t.Errorf("%s: %v", name, err)
		}
	}
	im = mustApply(t, im, Command{Type: CmdSetFeatures, Features: map[string]int16{"share.version": 0}})
	e1 := im.featuresEpoch
	im = mustApply(t, im, Command{Type: CmdSetFeatures, Features: map[string]int16{"transaction.version": 1}})
	if e1 <= 0 || im.featuresEpoch <= e1 || im.features["share.version"] != 0 || im.features["transaction.version"] != 1 {
		t.Fatalf("features %v epochs %d %d", im.features, e1, im.featuresEpoch)
	}
	enc, err := encodeImage(im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeImage(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.groupConfigs) != 1 || !maps.Equal(back.groupConfigs["g1"], im.groupConfigs["g1"]) ||
		!maps.Equal(back.features, im.features) || back.featuresEpoch != im.featuresEpoch {
		t.Fatalf("snapshot: %v %v %d", back.groupConfigs, back.features, back.featuresEpoch)
	}
}

// TestGroupConfigsSurviveRestart: group configs and feature levels set on
// a broker are there after it restarts (the metadata log replays them).
func TestGroupConfigsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	if err := b.SetGroupConfigs(ctx, "", map[string]string{"a": "b"}, false); !errors.Is(err, ErrInvalidGroupResource) {
		t.Fatalf("empty group: %v", err)
	}
	if err := b.SetGroupConfigs(ctx, "jobs", map[string]string{"share.record.lock.duration.ms": "20000"}, true); err != nil {
		t.Fatal(err)
	}
	if got := b.GroupConfigs("jobs"); len(got) != 0 {
		t.Fatalf("validate-only stored %v", got)
	}
	if err := b.SetGroupConfigs(ctx, "jobs", map[string]string{"share.record.lock.duration.ms": "20000", "share.auto.offset.reset": "earliest"}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetFeatures(ctx, map[string]int16{"share.version": 0}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = startBroker(t, testConfig(dir))
	defer b.Close()
	if got := b.GroupConfigsView("jobs"); got["share.record.lock.duration.ms"] != "20000" || got["share.auto.offset.reset"] != "earliest" {
		t.Fatalf("after restart: %v", got)
	}
	if lvl, ok := b.FeatureLevel("share.version"); !ok || lvl != 0 {
		t.Fatalf("share.version after restart: %d %v", lvl, ok)
	}
	if _, epoch := b.FinalizedFeatures(); epoch <= 0 {
		t.Fatalf("epoch %d", epoch)
	}
}

// TestGroupConfigsAcrossQuorum: configs and feature levels set through a
// broker that is not the controller reach every broker.
func TestGroupConfigsAcrossQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers")
	}
	ctx := context.Background()
	q := newTestQuorum(t)
	follower := (q.controller() + 1) % 3
	if err := q.brokers[follower].SetGroupConfigs(ctx, "jobs", map[string]string{"share.delivery.count.limit": "3"}, false); err != nil {
		t.Fatal(err)
	}
	if err := q.brokers[follower].SetFeatures(ctx, map[string]int16{"transaction.version": 1}); err != nil {
		t.Fatal(err)
	}
	for i, b := range q.brokers {
		var lvl int16
		var ok bool
		if !testwait.Until(10*time.Second, func() bool {
			lvl, ok = b.FeatureLevel("transaction.version")
			return b.GroupConfigs("jobs")["share.delivery.count.limit"] == "3" && ok && lvl == 1
		}) {
			t.Fatalf("broker %d: configs %v, transaction.version %d %v", i+1, b.GroupConfigs("jobs"), lvl, ok)
		}
	}
}
