package replication

import (
	"context"
	"fmt"
	"maps"
)

// Finalized feature levels (Kafka's features, KIP-584: transaction.version,
// share.version), as UpdateFeatures (kafka-features upgrade/downgrade)
// sets them. They live in the metadata image (CmdSetFeatures), so every
// broker reports the same levels in ApiVersions and they survive
// restarts. A feature absent from the image has the level of the broker's
// setting (transaction.version, share.version); a level set here wins,
// level 0 included (0 is stored, not removed: it disables the feature
// even where the setting says otherwise).
//
// Which features exist and which levels are valid is the protocol layer's
// (18_api_versions.go, 57_update_features.go); here levels are bounded
// numbers.

// CmdSetFeatures sets finalized feature levels (Command.Features: name ->
// level; features not named keep theirs). Persisted: the number must not
// change.
const CmdSetFeatures CommandType = 10

// maxFeatures bounds the features the image holds (Kafka has seven).
const maxFeatures = 32

// setFeatures applies levels to im (a fresh clone) and records the
// change's epoch: the image's applied count, which every replica computes
// alike and which only grows.
func (im *image) setFeatures(levels map[string]int16) error {
	if len(levels) == 0 {
		return fmt.Errorf("no feature levels")
	}
	m := maps.Clone(im.features)
	if m == nil {
		m = make(map[string]int16, len(levels))
	}
	for name, lvl := range levels {
		if name == "" || len(name) > 255 || lvl < 0 {
			return fmt.Errorf("feature %q level %d", name, lvl)
		}
		m[name] = lvl
	}
	if len(m) > maxFeatures {
		return fmt.Errorf("%d features, more than %d", len(m), maxFeatures)
	}
	im.features = m
	im.featuresEpoch = im.applied
	return nil
}

// FinalizedFeatures returns the feature levels set through SetFeatures (a
// copy; features never set are absent) and their epoch: 0 when none was
// ever set, else a number that grows with every change (Kafka's
// FinalizedFeaturesEpoch is the metadata offset of the change).
func (q *metadataQuorum) FinalizedFeatures() (map[string]int16, int64) {
	img := q.img.Load()
	return maps.Clone(img.features), img.featuresEpoch
}

// FeatureLevel returns a feature's level set through SetFeatures, and
// whether one was set.
func (q *metadataQuorum) FeatureLevel(name string) (int16, bool) {
	lvl, ok := q.img.Load().features[name]
	return lvl, ok
}

// SetFeatures commits finalized feature levels to the metadata quorum.
// The caller has checked them against the supported ranges and the
// upgrade types (UpdateFeatures); levels must not be negative.
func (q *metadataQuorum) SetFeatures(ctx context.Context, levels map[string]int16) error {
	if len(levels) == 0 || len(levels) > maxFeatures {
		return fmt.Errorf("replication: %d feature levels, want 1 to %d", len(levels), maxFeatures)
	}
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, err := q.commitLocked(Command{Type: CmdSetFeatures, Features: maps.Clone(levels)}); err != nil {
		return err
	}
	q.logger.Info("finalized feature levels set", "levels", levels)
	return nil
}
