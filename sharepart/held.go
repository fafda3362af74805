package sharepart

// WindowHeldBy reports whether acquisition on s is stopped by the
// record-lock window (cfg.MaxLocks records past the start offset) while
// member holds live locks in it: records past the window wait for
// acknowledgements, and some of those are member's own to send. A long
// poll of member's would hold back the very acknowledgements that let it
// go on (a client sends them with its next request), so the fetch path
// answers such a member soon instead (protocol, ShareFetch).
func WindowHeldBy(s *State, member string, cfg Config, logStart, end, nowMs int64) bool {
	window := windowEnd(s, cfg.MaxLocks, logStart, nowMs)
	if max(s.End(), logStart) < window || end <= window {
		return false // room left, or nothing past the window
	}
	for i := range s.recs {
		r := &s.recs[i]
		if r.state == Acquired && r.member == member && r.deadline > nowMs {
			return true
		}
	}
	return false
}
