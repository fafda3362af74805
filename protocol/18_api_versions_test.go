package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsListsRegistry(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		keys := registered()
		if len(resp.ApiKeys) != len(keys) {
			t.Fatalf("v%d: %d keys, want %d", v, len(resp.ApiKeys), len(keys))
		}
		for i, k := range resp.ApiKeys {
			r := apis[keys[i]]
			if k.ApiKey != keys[i] || k.MinVersion != r.min || k.MaxVersion != r.max {
				t.Fatalf("v%d: key %+v, want %d v%d-v%d", v, k, keys[i], r.min, r.max)
			}
		}
	}
}

// Kafka 4.1's maximum versions and Kafka 2.1's minimums (raised to magic 2
// for Produce/Fetch): the ranges we promise.
func TestApiVersionsRanges(t *testing.T) {
	want := map[int16][2]int16{
		0: {3, 12}, 1: {4, 17}, 2: {0, 10}, 3: {0, 13}, 18: {0, 4}, 19: {0, 7},
		20: {0, 6}, 22: {0, 5}, 32: {0, 4}, 37: {0, 3}, 60: {0, 2},
	}
	for key, w := range want {
		r := apis[key]
		if !r.ok || r.min > w[0] || r.max < w[1] {
			t.Errorf("%s: v%d-v%d, want at least v%d-v%d", kmsg.NameForKey(key), r.min, r.max, w[0], w[1])
		}
		if r.max > kmsg.RequestForKey(key).MaxVersion() {
			t.Errorf("%s: v%d above kmsg's maximum", kmsg.NameForKey(key), r.max)
		}
	}
}

// An ApiVersions version we do not have is answered in the v0 format with
// UNSUPPORTED_VERSION and the API list, and the connection stays usable.
func TestApiVersionsUnsupportedFallback(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 127
	req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
	corr := rc.send(req)
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.Version = 0
	resp := rc.recv(v0, corr).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	var max int16 = -1
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 18 {
			max = k.MaxVersion
		}
	}
	if max != 4 {
		t.Fatalf("ApiVersions max %d, want 4", max)
	}
	// Retry with the version offered.
	req.Version = max
	if r := rc.roundTrip(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("retry: error %d", r.ErrorCode)
	}
}

func TestApiVersionsBadSoftwareName(t *testing.T) {
	_, addr := startServer(t, Config{}, nil)
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-bad name", "1"
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("error %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a key twice did not panic")
		}
	}()
	register(18, 0, 4, concurrent, (*Server).handleApiVersions, anyone)
}

func TestRegisterWrongRequestTypePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a handler of another request type did not panic")
		}
	}()
	register(200, 0, 0, concurrent, (*Server).handleApiVersions, anyone)
}
