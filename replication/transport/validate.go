package transport

import (
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/raft"
)

// What the Mux checks before hashicorp/raft sees anything a peer sent
// (issue 19, item 1). raft trusts its transport: it panics on a
// configuration entry that does not decode (DecodeConfiguration), on a
// committed entry of a type it does not know (prepareLog), and persists any
// term it is shown, so one forged frame used to crash a broker and, once
// in the metadata log, crash it again at every restart. The rules:
//
//   - every term (of a request, an answer, an entry, a last log) is at most
//     maxRaftTerm: the term is the partition's Kafka leader epoch, an
//     int32 on the wire, and one above it broke Produce for good;
//   - an AppendEntries' entries are consecutive from PrevLogEntry+1, their
//     terms never fall and never exceed the request's; their types are
//     the four raft's protocol version 3 writes (command, no-op, barrier,
//     configuration), never the deprecated peer-list types;
//   - a configuration (an entry's or an InstallSnapshot's) decodes with
//     raft's own decoder and is one raft could hold: 1..maxConfigServers
//     servers, IDs and addresses non-empty and unique, known suffrages, a
//     voter among them;
//   - an InstallSnapshot is of the snapshot version raft writes, its
//     configuration index within the snapshot;
//   - on a connection whose dialer named itself in the preface, every
//     request's header (and every heartbeat's) names the same node
//     (connection identity, mux.go and server.go). Without TLS a peer can still
//     claim an ID that is not its own; with mutual TLS the preface's ID
//     must be the certificate's (tls.go).
//
// A frame that breaks a rule closes its connection, as one that does not
// decode does; raft never sees it. The fuzz test (FuzzMuxDecode) runs
// raft's decoders behind these checks.

// ErrRefused is a frame that decoded but breaks a rule above, or a
// peer the broker does not admit.
var ErrRefused = errors.New("replication: refused peer frame")

const (
	// maxRaftTerm is the largest term accepted from a peer: a leader
	// epoch is an int32 in Kafka's protocol.
	maxRaftTerm = math.MaxInt32
	// maxConfigServers bounds the servers of a configuration (metadata
	// voters are at most 9, replicas of a partition far fewer).
	maxConfigServers = 256
	// maxPeerIDBytes bounds the node ID a dialer names in its preface.
	maxPeerIDBytes = 64
)

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

func checkTerm(what string, term uint64) error {
	if term > maxRaftTerm {
		return refused("%s %d above %d", what, term, uint64(maxRaftTerm))
	}
	return nil
}

// checkHeader checks that h names peer, the node the connection's dialer
// named in its preface ("" when it named none: a test's Mux).
func checkHeader(h raft.RPCHeader, peer string) error {
	if peer != "" && string(h.ID) != peer {
		return refused("request from node %q on a connection of node %q", h.ID, peer)
	}
	return nil
}

// checkRequest validates a decoded request from peer before raft sees it.
func checkRequest(cmd any, peer string) error {
	switch m := cmd.(type) {
	case *raft.AppendEntriesRequest:
		if err := checkHeader(m.RPCHeader, peer); err != nil {
			return err
		}
		if err := checkTerm("term", m.Term); err != nil {
			return err
		}
		if m.PrevLogTerm > m.Term {
			return refused("previous log term %d above term %d", m.PrevLogTerm, m.Term)
		}
		last := m.PrevLogTerm
		for i, l := range m.Entries {
			if l == nil {
				return refused("nil entry")
			}
			if l.Index != m.PrevLogEntry+1+uint64(i) {
				return refused("entry %d has index %d after previous index %d", i, l.Index, m.PrevLogEntry)
			}
			if l.Term < last || l.Term > m.Term {
				return refused("entry %d of term %d (previous %d, request %d)", l.Index, l.Term, last, m.Term)
			}
			last = l.Term
			switch l.Type {
			case raft.LogCommand, raft.LogNoop, raft.LogBarrier:
			case raft.LogConfiguration:
				if _, err := decodeConfiguration(l.Data); err != nil {
					return fmt.Errorf("entry %d: %w", l.Index, err)
				}
			default:
				return refused("entry %d of type %d", l.Index, l.Type)
			}
		}
	case *raft.RequestVoteRequest:
		if err := checkHeader(m.RPCHeader, peer); err != nil {
			return err
		}
		if err := checkTerm("term", m.Term); err != nil {
			return err
		}
		if m.LastLogTerm > m.Term {
			return refused("last log term %d above term %d", m.LastLogTerm, m.Term)
		}
	case *raft.RequestPreVoteRequest:
		if err := checkHeader(m.RPCHeader, peer); err != nil {
			return err
		}
		if err := checkTerm("term", m.Term); err != nil {
			return err
		}
		if m.LastLogTerm > m.Term {
			return refused("last log term %d above term %d", m.LastLogTerm, m.Term)
		}
	case *raft.TimeoutNowRequest:
		return checkHeader(m.RPCHeader, peer)
	case *raft.InstallSnapshotRequest:
		if err := checkHeader(m.RPCHeader, peer); err != nil {
			return err
		}
		if err := checkTerm("term", m.Term); err != nil {
			return err
		}
		if m.LastLogTerm > m.Term {
			return refused("snapshot last log term %d above term %d", m.LastLogTerm, m.Term)
		}
		if m.SnapshotVersion != raft.SnapshotVersionMax {
			return refused("snapshot version %d", m.SnapshotVersion)
		}
		if m.ConfigurationIndex > m.LastLogIndex || m.LastLogIndex == 0 {
			return refused("snapshot at index %d with configuration index %d", m.LastLogIndex, m.ConfigurationIndex)
		}
		if _, err := decodeConfiguration(m.Configuration); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	case *beatRequests:
		for _, b := range m.beats {
			if err := checkHeader(b.req.RPCHeader, peer); err != nil {
				return err
			}
			if err := checkTerm("heartbeat term", b.req.Term); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkResponse validates a decoded answer from a peer before raft sees it.
func checkResponse(resp any) error {
	switch m := resp.(type) {
	case *raft.AppendEntriesResponse:
		return checkTerm("answer term", m.Term)
	case *raft.RequestVoteResponse:
		return checkTerm("answer term", m.Term)
	case *raft.RequestPreVoteResponse:
		return checkTerm("answer term", m.Term)
	case *raft.InstallSnapshotResponse:
		return checkTerm("answer term", m.Term)
	case *beatAnswers:
		for _, r := range m.results {
			if r.err == nil {
				if err := checkTerm("heartbeat answer term", r.resp.Term); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// decodeConfiguration decodes a configuration with raft's decoder (which
// panics on bad input) and checks it is one raft could hold.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = refused("configuration does not decode: %v", r)
			}
		}()
		c = raft.DecodeConfiguration(b)
	}()
	if err != nil {
		return raft.Configuration{}, err
	}
	if n := len(c.Servers); n == 0 || n > maxConfigServers {
		return raft.Configuration{}, refused("configuration of %d servers", n)
	}
	ids := make(map[raft.ServerID]bool, len(c.Servers))
	addrs := make(map[raft.ServerAddress]bool, len(c.Servers))
	voter := false
	for _, s := range c.Servers {
		switch s.Suffrage {
		case raft.Voter:
			voter = true
		case raft.Nonvoter, raft.Staging:
		default:
			return raft.Configuration{}, refused("configuration server %q of suffrage %d", s.ID, s.Suffrage)
		}
		if s.ID == "" || s.Address == "" || ids[s.ID] || addrs[s.Address] {
			return raft.Configuration{}, refused("configuration server %q at %q empty or repeated", s.ID, s.Address)
		}
		ids[s.ID], addrs[s.Address] = true, true
	}
	if !voter {
		return raft.Configuration{}, refused("configuration without a voter")
	}
	return c, nil
}
