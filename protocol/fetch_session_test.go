package protocol

import (
	"testing"
	"time"
)

func sessionTargets(n int) []fetchTarget {
	out := make([]fetchTarget, n)
	for i := range out {
		out[i] = fetchTarget{topic: "t", partition: int32(i)}
	}
	return out
}

// The cache holds at most maxFetchSessions sessions and maxCachedPartitions
// partitions, evicting the least recently used.
func TestFetchSessionCacheLimits(t *testing.T) {
	var fs fetchSessions
	now := time.Unix(1000, 0)
	var first *fetchSession
	for i := range maxFetchSessions + 1 {
		sess := fs.create(sessionTargets(2), now.Add(time.Duration(i)*time.Second))
		sess.mu.Unlock()
		if i == 0 {
			first = sess
		}
	}
	if len(fs.sessions) != maxFetchSessions || fs.total != 2*maxFetchSessions {
		t.Fatalf("%d sessions, %d partitions", len(fs.sessions), fs.total)
	}
	if _, code := fs.get(first.id, 1, now); code == 0 {
		t.Fatal("least recently used session not evicted")
	}
	if fs.create(sessionTargets(maxSessionPartitions+1), now) != nil {
		t.Fatal("oversized session created")
	}
	big := fs.create(sessionTargets(maxSessionPartitions), now.Add(time.Hour))
	big.mu.Unlock()
	if fs.total > maxCachedPartitions {
		t.Fatalf("total %d over the cap", fs.total)
	}
	if !fs.resize(big, 10) || fs.resize(big, maxCachedPartitions+1) {
		t.Fatal("resize accounting")
	}
	fs.remove(big.id)
	total := 0
	for _, s := range fs.sessions {
		total += s.size
	}
	if total != fs.total {
		t.Fatalf("total %d, sessions hold %d", fs.total, total)
	}
}
