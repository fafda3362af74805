package protocol

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behaviour:
//   - Answers with the version range of every API registered with regKey (the
//     table below is filled by each handler file's init), so it cannot list an
//     API nobody serves.
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
//     share.version (supported 0-1, finalized at 1 by default: share
//     groups on) and transaction.version (supported 0-2, finalized at 2 by
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
func init() { regKey(18, 0, 4) }

// apiRange is one registered API's version range.
type apiRange struct {
	min, max int16
	ok       bool
}

// apis is the registry, indexed by key. Written only by init functions.
var apis [256]apiRange

// regKey registers the versions served for key. A key registered twice is
// a programmer error: panic at init.
func regKey(key, min, max int16) {
	if key < 0 || int(key) >= len(apis) || min > max || min < 0 {
		panic(fmt.Sprintf("protocol: bad registration key %d v%d-v%d", key, min, max))
	}
	if apis[key].ok {
		panic(fmt.Sprintf("protocol: api key %d registered twice", key))
	}
	if r := kmsg.RequestForKey(key); r == nil || r.MaxVersion() < max {
		panic(fmt.Sprintf("protocol: kmsg cannot encode key %d v%d", key, max))
	}
	apis[key] = apiRange{min: min, max: max, ok: true}
}

// registered returns the registered keys in order.
func registered() []int16 {
	var keys []int16
	for k := range apis {
		if apis[k].ok {
			keys = append(keys, int16(k))
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// versionSupported reports whether key at version is served.
func versionSupported(key, version int16) bool {
	if key < 0 || int(key) >= len(apis) {
		return false
	}
	r := apis[key]
	return r.ok && version >= r.min && version <= r.max
}

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

func (s *Server) handleApiVersions(req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
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
