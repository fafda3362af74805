package transport

import "github.com/hashicorp/raft"

// What the package's external tests (package transport_test: those that
// run raft over the Mux with replication/internal/raftharness, which
// imports this package) see of its insides.

// WaitersFor is the number of RPCs waiting for target to come back
// (catchup.go).
func (m *Mux) WaitersFor(target raft.ServerAddress) int {
	m.mu.Lock()
	p := m.peers[target]
	m.mu.Unlock()
	if p == nil {
		return 0
	}
	p.reach.mu.Lock()
	defer p.reach.mu.Unlock()
	return len(p.reach.waiters)
}
