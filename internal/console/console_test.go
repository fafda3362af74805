package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
)

func TestHistoryLimitAndTrend(t *testing.T) {
	h := NewHistory(time.Minute, 10*time.Second, 2, 30*time.Second)
	t0 := time.Unix(1_800_000_000, 0)
	k := func(p int32) SeriesKey { return SeriesKey{"g", "t", p} }
	// Lag 10, 20, 30: growing; a third series is refused at the limit.
	for i := range 3 {
		h.Record(t0.Add(time.Duration(i)*10*time.Second), []Sample{
			{k(0), int64(10 * (i + 1)), 0}, {k(1), 5, 5}, {k(2), 1, 0}})
	}
	st := h.Stats()
	if st.Series != 2 || st.Refused != 3 || st.Samples != 6 {
		t.Fatalf("stats %+v", st)
	}
	tr, ok := h.Trend(k(0))
	if !ok || len(tr.Points) != 3 || tr.Points[2].Lag != 30 || tr.Growth == nil || *tr.Growth != 1 || *tr.Drain != -1 {
		t.Fatalf("growing trend %+v", tr)
	}
	// Consumed down to 0 over the next samples: the rate turns negative
	// and the drain time is 0 once there is no lag.
	h.Record(t0.Add(30*time.Second), []Sample{{k(0), 30, 28}, {k(1), 5, 5}})
	tr, _ = h.Trend(k(0))
	if *tr.Growth >= 0 || *tr.Drain <= 0 {
		t.Fatalf("draining trend %+v growth %v drain %v", tr, *tr.Growth, *tr.Drain)
	}
	h.Record(t0.Add(40*time.Second), []Sample{{k(0), 30, 30}, {k(1), 5, 5}})
	tr, _ = h.Trend(k(0))
	if *tr.Growth >= 0 || *tr.Drain != 0 || tr.Points[len(tr.Points)-1].Lag != 0 {
		t.Fatalf("drained trend %+v", tr)
	}
	// The ring keeps a span: after a minute more of samples only 6 points.
	for i := 5; i < 12; i++ {
		h.Record(t0.Add(time.Duration(i)*10*time.Second), []Sample{{k(0), 30, 30}})
	}
	tr, _ = h.Trend(k(0))
	if len(tr.Points) != 6 {
		t.Fatalf("%d points kept, want 6", len(tr.Points))
	}
	// k(1), unseen for over a span, is dropped, making room for k(2).
	if _, ok := h.Trend(k(1)); ok {
		t.Fatal("a series unseen for a span is kept")
	}
	h.Record(t0.Add(130*time.Second), []Sample{{k(0), 30, 30}, {k(2), 3, 1}})
	if _, ok := h.Trend(k(2)); !ok {
		t.Fatal("a new series refused below the limit")
	}
}

// TestHistoryMemoryAtLimit fills a history of the default size (an hour
// at 15 s, DefaultMaxSeries series) and measures its heap against the
// estimate Stats reports (and /ui/api/info shows).
func TestHistoryMemoryAtLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MiB")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := NewHistory(time.Hour, 15*time.Second, DefaultMaxSeries, 5*time.Minute)
	samples := make([]Sample, DefaultMaxSeries)
	for i := range samples {
		samples[i] = Sample{Key: SeriesKey{"group-" + string(rune('a'+i%26)), "topic", int32(i)}}
	}
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 240 {
		for j := range samples {
			samples[j].End, samples[j].Committed = int64(i*10), int64(i*9)
		}
		h.Record(t0.Add(time.Duration(i)*15*time.Second), samples)
	}
	samples = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	st := h.Stats()
	t.Logf("lag history at its limit: %d series x %d samples: heap %.2f MiB measured, %.2f MiB estimated (%d B/series)",
		st.Series, st.Samples, float64(heap)/(1<<20), float64(st.Bytes)/(1<<20), heap/int64(st.Series))
	if st.Series != DefaultMaxSeries {
		t.Fatalf("%d series, want %d", st.Series, DefaultMaxSeries)
	}
	if heap > 2*st.Bytes || heap < st.Bytes/2 {
		t.Errorf("measured %d B, estimate %d B: off by more than 2x", heap, st.Bytes)
	}
	runtime.KeepAlive(h)
}

// TestAdminGate: admin actions need the setting, a loopback client or a
// SCRAM user's password (and, with an authorizer, the ACL), and the
// console's header; reads are open.
func TestAdminGate(t *testing.T) {
	cred, err := auth.NewScramCredential(auth.MechScramSHA512, "alice-secret", []byte("salt"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(user, mech string) (auth.ScramCredential, bool) {
		return cred, user == "alice" && mech == auth.MechScramSHA512
	}
	c, err := New(Options{Bootstrap: "127.0.0.1:1", Admin: true, Lazy: true, Auth: Auth{Credential: lookup}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	user, pass := "", ""
	do := func(remote string, header bool) (int, string) {
		r := httptest.NewRequest(http.MethodPost, "/ui/api/share-groups/g/resume", strings.NewReader("{}"))
		r.RemoteAddr = remote
		if header {
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(adminHeader, "1")
		}
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if code, body := do("10.1.2.3:5555", true); code != http.StatusUnauthorized || !strings.Contains(body, "off loopback") {
		t.Errorf("from 10.1.2.3: %d %s", code, body)
	}
	user, pass = "alice", "wrong"
	if code, body := do("10.1.2.3:5555", true); code != http.StatusUnauthorized || !strings.Contains(body, "invalid credentials") {
		t.Errorf("from 10.1.2.3 with a wrong password: %d %s", code, body)
	}
	// Through the gate: no ResumeShare action was given, so 404.
	user, pass = "alice", "alice-secret"
	if code, body := do("10.1.2.3:5555", true); code != http.StatusNotFound {
		t.Errorf("from 10.1.2.3 as alice: %d %s", code, body)
	}
	// With an authorizer and no ACL for alice, resume (ALTER_CONFIGS of
	// the group) is refused before the action is looked at.
	c.opts.Auth.Authorizer = &acl.Authorizer{}
	c.opts.Actions.ResumeShare = func(context.Context, string) (string, error) { return "resumed", nil }
	if code, body := do("10.1.2.3:5555", true); code != http.StatusForbidden || !strings.Contains(body, `GROUP_AUTHORIZATION_FAILED: User:alice may not ALTER_CONFIGS GROUP \"g\"`) {
		t.Errorf("alice without the ACL: %d %s", code, body)
	}
	set := acl.NewSet([]acl.Binding{{ResourceType: acl.Group, ResourceName: "g", PatternType: acl.Literal, Principal: "User:alice",
		Host: "10.1.2.3", Operation: acl.AlterConfigs, Permission: acl.Allow}})
	c.opts.Auth.ACLs = func() *acl.Set { return set }
	if code, body := do("10.1.2.3:5555", true); code != http.StatusOK || !strings.Contains(body, "resumed") {
		t.Errorf("alice with ALTER_CONFIGS from her host: %d %s", code, body)
	}
	if code, body := do("10.9.9.9:5555", true); code != http.StatusForbidden {
		t.Errorf("alice from another host than the ACL's: %d %s", code, body)
	}
	// The local operator needs no ACL.
	user = ""
	if code, body := do("127.0.0.1:5555", true); code != http.StatusOK {
		t.Errorf("the local operator: %d %s", code, body)
	}
	c.opts.Actions.ResumeShare, c.opts.Auth.Authorizer = nil, nil
	if code, body := do("127.0.0.1:5555", false); code != http.StatusForbidden || !strings.Contains(body, adminHeader) {
		t.Errorf("without the header: %d %s", code, body)
	}
	// Allowed through the gate: no ResumeShare action was given, so 404.
	if code, body := do("[::1]:5555", true); code != http.StatusNotFound {
		t.Errorf("from ::1: %d %s", code, body)
	}
	r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "app.js") {
		t.Errorf("GET /ui/: %d", w.Code)
	}
}

func TestDecode(t *testing.T) {
	if d := decode([]byte(`{"a":1}`), false); !d.IsText || !strings.Contains(d.JSON, `"a": 1`) || d.Hex != "7b2261223a317d" {
		t.Errorf("json: %+v", d)
	}
	if d := decode([]byte{0xff}, false); d.IsText || d.Hex != "ff" {
		t.Errorf("binary: %+v", d)
	}
	if d := decode(nil, true); !d.Null {
		t.Errorf("null: %+v", d)
	}
	big := make([]byte, maxShown+10)
	if d := decode(big, false); !d.Truncated || len(d.Hex) != 2*maxShown || d.Size != maxShown+10 {
		t.Errorf("big: truncated %v hex %d", d.Truncated, len(d.Hex))
	}
}
