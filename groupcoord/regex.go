package groupcoord

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// KIP-848 regex subscriptions (ConsumerGroupHeartbeat's
// SubscribedTopicRegex). Kafka evaluates the regex on the broker with
// RE2/J; Go's regexp is RE2, the same syntax and the same linear-time
// guarantee. As Java's Matcher.matches(), the regex must match the whole
// topic name. Every topic in the metadata is a candidate, internal ones
// (__consumer_offsets, __transaction_state) included, as in Kafka 4: a
// regex that names an internal topic gets its partitions (a client that
// does not want them writes a regex that does not match them).
//
// Each group keeps one resolution per distinct regex its members use,
// tagged with the metadata version it was computed from; every heartbeat
// re-resolves those whose version is stale, so a topic created or deleted
// reaches the group's subscription (and its target assignment, through an
// epoch bump) at the next heartbeat of any member. A member's subscription
// is the union of its topic names and its regex's topics.

// maxRegexLen bounds a subscribed regex (Kafka has none; RE2 programs grow
// with the pattern, and each is kept per group).
const maxRegexLen = 4096

// topicLister lists every topic name (sorted) and the version of the
// metadata it comes from; a new version means topics may have changed.
type topicLister func() (names []string, version int64)

// regexState is one regex of a group and its current resolution.
type regexState struct {
	re      *regexp.Regexp
	version int64    // metadata version of topics; -1 = never resolved
	topics  []string // matching topic names, sorted
}

// compileSubscriptionRegex compiles a SubscribedTopicRegex with Kafka's
// whole-name semantics. The error message follows Kafka's.
func compileSubscriptionRegex(src string) (*regexp.Regexp, error) {
	if len(src) > maxRegexLen {
		return nil, fmt.Errorf("SubscribedTopicRegex is %d bytes long, more than %d", len(src), maxRegexLen)
	}
	if _, err := regexp.Compile(src); err != nil { // for a message about the pattern as given
		msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
		return nil, fmt.Errorf("SubscribedTopicRegex `%s` is not a valid regular expression: %s.", src, msg)
	}
	return regexp.Compile("^(?:" + src + ")$")
}

// memberTopics is m's subscription: its topic names and its regex's
// current resolution, sorted and without duplicates.
func (g *cgroup) memberTopics(m *cmember) []string {
	rs := g.regexes[m.regex]
	if m.regex == "" || rs == nil || len(rs.topics) == 0 {
		return m.subscribed
	}
	out := make([]string, 0, len(m.subscribed)+len(rs.topics))
	out = append(append(out, m.subscribed...), rs.topics...)
	sort.Strings(out)
	return dedupe(out)
}

// resolveRegexes brings the resolution of every regex in use up to date
// with the topic list (listing it only when some regex is stale) and drops
// regexes no member uses any more. It reports whether any resolution
// changed.
func (g *cgroup) resolveRegexes(list topicLister) bool {
	inUse := map[string]bool{}
	for _, m := range g.members {
		if m.regex != "" {
			inUse[m.regex] = true
		}
	}
	for src := range g.regexes {
		if !inUse[src] {
			delete(g.regexes, src)
		}
	}
	if len(inUse) == 0 || list == nil {
		return false
	}
	var names []string
	version := int64(-1)
	listed := false
	changed := false
	for src := range inUse {
		rs := g.regexes[src]
		if rs == nil {
			re, err := compileSubscriptionRegex(src)
			if err != nil {
				continue // validated when it was set; a stored one may predate a limit
			}
			rs = &regexState{re: re, version: -1}
			if g.regexes == nil {
				g.regexes = map[string]*regexState{}
			}
			g.regexes[src] = rs
		}
		if !listed {
			names, version = list()
			listed = true
		}
		if rs.version == version {
			continue
		}
		var match []string
		for _, n := range names {
			if rs.re.MatchString(n) {
				match = append(match, n)
			}
		}
		if !equalStrings(match, rs.topics) {
			changed = true
		}
		rs.topics, rs.version = match, version
	}
	return changed
}
