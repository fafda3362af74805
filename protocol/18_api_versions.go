package protocol

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behaviour:
//   - Answers with the version range of every API registered with register
//     (dispatch.go; each handler file's init registers its handler), so it
//     cannot list an API nobody serves.
//   - v3+: ClientSoftwareName / ClientSoftwareVersion are validated against
//     Kafka's pattern; a mismatch is INVALID_REQUEST (as Kafka does), still
//     with the API list.
//   - A version above our maximum is answered in the v0 format (and with a v0
//     response header) carrying UNSUPPORTED_VERSION and the API list; the body
//     of such a request is not parsed (Kafka: "isUnsupportedApiVersionsRequest").
//
// Version notes:
//   - v1: ThrottleMillis
//   - v3: flexible; client software name/version; features (KIP-584):
//     share.version (supported 0-2, finalized at 2 by default: share
//     groups with dead-letter topics on) and transaction.version (supported 0-2, finalized at 2 by
//     default, so clients use KIP-890 part 2), each at the level
//     UpdateFeatures set in the metadata, else at its setting
//     (Config.ShareVersion, txncoord.Config.TransactionVersion); a feature
//     at level 0 is listed as supported, not finalized, as in Kafka.
//     FinalizedFeaturesEpoch is 1 until UpdateFeatures changes a level,
//     then grows with each change (57_update_features.go); -1 when nothing
//     is finalized.
//   - v4: no change (KIP-511 follow-up: the broker may return
//     UNSUPPORTED_VERSION with the highest version it supports)
//
// Differences from Kafka: v5 (ClusterID/NodeID sanity check, KIP-1242) is
// not served yet; Kafka 4.1's maximum is v4.
func init() { register(18, 0, 4, concurrent, (*Server).handleApiVersions, anyone) }

// clientSoftwareRe is Kafka's pattern for ClientSoftwareName/Version.
var clientSoftwareRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func apiVersionsResponse(version int16, code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = code
	for _, k := range registered() {
		r := apis[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, r.min, r.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	resp.FinalizedFeaturesEpoch = -1
	return resp
}

func (s *Server) handleApiVersions(_ context.Context, req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	if !versionSupported(18, req.Version) {
		// Answered in the v0 format whatever was asked.
		return apiVersionsResponse(0, kerr.UnsupportedVersion.Code), nil
	}
	code := int16(0)
	if req.Version >= 3 && (!clientSoftwareRe.MatchString(req.ClientSoftwareName) ||
		!clientSoftwareRe.MatchString(req.ClientSoftwareVersion)) {
		code = kerr.InvalidRequest.Code
	}
	resp := apiVersionsResponse(req.Version, code)
	if req.Version >= 3 && code == 0 {
		for _, f := range features {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			// Level 0 is not finalized (Kafka removes the feature).
			if lvl := s.featureLevel(f.name); lvl >= 1 {
				ff := kmsg.NewApiVersionsResponseFinalizedFeature()
				ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, lvl, lvl
				resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
			}
		}
		if len(resp.FinalizedFeatures) > 0 {
			resp.FinalizedFeaturesEpoch = s.featuresEpoch()
		}
	}
	return resp, nil
}
