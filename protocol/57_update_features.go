package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// UpdateFeatures: v0-2
//
// Behaviour:
//   - Sets the finalized levels of the features this broker supports
//     (features below: share.version 0-2, transaction.version 0-2), as
//     kafka-features upgrade/downgrade/disable does. The levels are
//     committed to the replicated metadata (Broker.SetFeatures), so every
//     broker reports them in ApiVersions and they survive restarts; a
//     level set here wins over the share.version and transaction.version
//     settings, level 0 included.
//   - All or nothing, as Kafka: the first invalid update fails the whole
//     request with INVALID_UPDATE_VERSION and Kafka's message ("The update
//     failed for all features since the following feature had an error:
//     ..."): an unknown feature, a level outside the supported range, a
//     lower level with UPGRADE ("Can't downgrade the version of this
//     feature without setting the upgrade type to either safe or unsafe
//     downgrade."), a higher one with a downgrade type ("Can't downgrade to
//     a newer version."), an unknown upgrade type. The same level is a
//     success that changes nothing.
//   - ValidateOnly (v1+) checks without committing.
//   - share.version 0 turns share groups off (shareEnabled: their APIs
//     answer UNSUPPORTED_VERSION); transaction.version only changes what
//     ApiVersions advertises (clients choose EndTxn v5 and the implicit
//     partition adds of KIP-890 part 2 by it; the coordinator serves both).
//
// Version notes:
//   - v0: AllowDowngrade (true = a safe downgrade) instead of UpgradeType;
//     v1: UpgradeType (1 upgrade, 2 safe downgrade, 3 unsafe downgrade),
//     ValidateOnly; v0-1 list a result per feature on success; v2 lists
//     none (Kafka's KIP-1022 change).
//
// Differences from Kafka: no metadata.version, group.version,
// streams.version, kraft.version or eligible.leader.replicas.version (not
// supported features, refused as unknown); a safe downgrade is never
// refused as losing metadata (nothing depends on these levels' metadata).
func init() { register(57, 0, 2, barrier, (*Server).handleUpdateFeatures, needsCluster(acl.Alter)) }

// A supported feature and its range.
type featureDef struct {
	name     string
	min, max int16
}

const (
	featureShare       = "share.version"
	featureTransaction = "transaction.version"
)

// features are the features this broker supports: share.version 1 serves
// share groups (KIP-932), 2 adds their dead-letter topics (KIP-1191,
// share_dlq.go; Kafka 4.4's latest production level, finalized by
// default). transaction.version 2 is KIP-890 part 2.
var features = []featureDef{
	{featureShare, 0, 2},
	{featureTransaction, 0, 2},
}

func featureByName(name string) (featureDef, bool) {
	for _, f := range features {
		if f.name == name {
			return f, true
		}
	}
	return featureDef{}, false
}

// featureLevel is a feature's finalized level: the one UpdateFeatures set
// in the metadata, else the broker's setting.
func (s *Server) featureLevel(name string) int16 {
	if s.broker != nil { // nil in tests of the framing alone
		if lvl, ok := s.broker.FeatureLevel(name); ok {
			return lvl
		}
	}
	switch name {
	case featureShare:
		switch {
		case s.cfg.ShareVersion < 0:
			return 0
		case s.cfg.ShareVersion == 0:
			return 2
		}
		return s.cfg.ShareVersion
	case featureTransaction:
		return s.txns.TransactionVersion()
	}
	return 0
}

// featuresEpoch is FinalizedFeaturesEpoch: 1 while the levels are the
// settings', then one more than the metadata's epoch of the last change,
// so it only grows and every broker reports the same.
func (s *Server) featuresEpoch() int64 {
	if s.broker != nil {
		if _, epoch := s.broker.FinalizedFeatures(); epoch > 0 {
			return epoch + 1
		}
	}
	return 1
}

// Upgrade types of UpdateFeatures v1+ (on the wire).
const (
	upgradeUpgrade         = 1
	upgradeSafeDowngrade   = 2
	upgradeUnsafeDowngrade = 3
)

func (s *Server) handleUpdateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	if len(req.FeatureUpdates) > len(features)*4 {
		return fail(kerr.InvalidRequest.Code, fmt.Sprintf("%d feature updates in one request", len(req.FeatureUpdates)))
	}
	levels := make(map[string]int16, len(req.FeatureUpdates))
	for _, u := range req.FeatureUpdates {
		typ := u.UpgradeType
		if req.Version == 0 {
			typ = upgradeUpgrade
			if u.AllowDowngrade {
				typ = upgradeSafeDowngrade
			}
		}
		if msg := s.checkFeatureUpdate(u.Feature, u.MaxVersionLevel, typ, levels); msg != "" {
			return fail(kerr.InvalidUpdateVersion.Code, "The update failed for all features since the following feature had an error: "+
				fmt.Sprintf("Invalid update version %d for feature %s. %s", u.MaxVersionLevel, u.Feature, msg))
		}
		levels[u.Feature] = u.MaxVersionLevel
	}
	if !req.ValidateOnly && len(levels) > 0 {
		if err := s.broker.SetFeatures(ctx, levels); err != nil {
			return fail(errCode(err), err.Error())
		}
	}
	if req.Version <= 1 {
		none := "NONE" // Kafka's message of a success
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature, r.ErrorMessage = u.Feature, &none
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

// checkFeatureUpdate returns why an update of feature to level with
// upgrade type typ is refused (Kafka's wording), or "". pending holds the
// levels of the request's earlier updates.
func (s *Server) checkFeatureUpdate(name string, level int16, typ int8, pending map[string]int16) string {
	f, ok := featureByName(name)
	if !ok {
		return fmt.Sprintf("Local controller %d does not support this feature.", s.broker.NodeID())
	}
	if typ < upgradeUpgrade || typ > upgradeUnsafeDowngrade {
		return "The controller does not support the given upgrade type."
	}
	if level < f.min || level > f.max {
		return fmt.Sprintf("Local controller %d only supports versions %d-%d", s.broker.NodeID(), f.min, f.max)
	}
	cur, ok := pending[name]
	if !ok {
		cur = s.featureLevel(name)
	}
	switch {
	case level < cur && typ == upgradeUpgrade:
		return "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
	case level > cur && typ != upgradeUpgrade:
		return "Can't downgrade to a newer version."
	}
	return ""
}
