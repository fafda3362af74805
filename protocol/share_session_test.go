package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestShareSessionsLimitAndEpochs: the session errors of KIP-932 on an
// injected clock: the next epoch only, SHARE_SESSION_NOT_FOUND,
// INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED while every
// session is in use, eviction of one idle for shareSessionIdle, and a
// member's new epoch-0 session replacing its old one.
func TestShareSessionsLimitAndEpochs(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ss := newShareSessions(2, func() time.Time { return now })
	a, b, c := shareSessionKey{"g", "a"}, shareSessionKey{"g", "b"}, shareSessionKey{"g", "c"}
	p0 := []shareTPKey{{partition: 0}}
	if _, code := ss.open(a, p0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if _, code := ss.open(b, p0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if _, code := ss.open(c, p0); code != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("third session with a limit of 2: %v", kerr.ErrorForCode(code))
	}
	if _, code := ss.open(a, p0); code != 0 { // a's own session is replaced, not counted twice
		t.Fatalf("reopening a: %v", kerr.ErrorForCode(code))
	}
	if _, code := ss.next(a, 2, nil, nil); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("epoch 2 before 1: %v", kerr.ErrorForCode(code))
	}
	if parts, code := ss.next(a, 1, []shareTPKey{{partition: 1}}, nil); code != 0 || len(parts) != 2 {
		t.Fatalf("epoch 1: %v %v", parts, kerr.ErrorForCode(code))
	}
	if _, code := ss.next(c, 1, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(code))
	}
	// b idles past shareSessionIdle while a is used: c evicts b.
	now = now.Add(shareSessionIdle / 2)
	if _, code := ss.next(a, 2, nil, nil); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	now = now.Add(shareSessionIdle/2 + time.Second)
	if _, code := ss.open(c, p0); code != 0 {
		t.Fatalf("c after b idled: %v", kerr.ErrorForCode(code))
	}
	if _, code := ss.next(b, 1, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("evicted b: %v", kerr.ErrorForCode(code))
	}
	if parts, code := ss.close(a); code != 0 || len(parts) != 2 {
		t.Fatalf("closing a: %v %v", parts, kerr.ErrorForCode(code))
	}
	if _, code := ss.close(a); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("closing a twice: %v", kerr.ErrorForCode(code))
	}
}

// TestShareSessionsHeldWait: a session's fetches held back by the
// member's own locks wait heldWaitMin, then twice as long each time in a
// row up to heldWaitMax; one that was not held ends the streak.
func TestShareSessionsHeldWait(t *testing.T) {
	ss := newShareSessions(2, time.Now)
	k := shareSessionKey{"g", "a"}
	if _, code := ss.open(k, []shareTPKey{{partition: 0}}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	want := heldWaitMin
	for i := range 12 {
		if got := ss.heldWait(k, true); got != want {
			t.Fatalf("held fetch %d in a row waits %v, want %v", i+1, got, want)
		}
		want = min(2*want, heldWaitMax)
	}
	ss.heldWait(k, false)
	if got := ss.heldWait(k, true); got != heldWaitMin {
		t.Fatalf("after the streak ended: %v, want %v", got, heldWaitMin)
	}
}
