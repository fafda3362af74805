package retention

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/script"
	"github.com/strata-io/strata/log"
)

// The policy functions are tested with scripts in testdata/ (the format:
// internal/script). Commands:
//
//	plan [start=N] [hw=N] [lso=N] [now=MS] policy=delete,compact [retention.ms=N] [retention.bytes=N]
//	0 100 1000 5000   (segments, one a line: base next size newest-timestamp; the last is active)
//	----
//	the PlanDelete actions and their reasons, or "nothing"
//
//	plan-compact [first-dirty=N] [now=MS] policy=... [min.cleanable.dirty.ratio=F] [min.compaction.lag.ms=N] [max.compaction.lag.ms=N]
//	(segments as for plan)
//	----
//	the PlanCompact actions and their reasons, or "nothing"
//
// For example (testdata/delete.txt, testdata/compact.txt):
//
//	plan now=6500 policy=delete retention.ms=1000
//	0 100 1000 5000
//	100 200 1000 6000
//	200 300 500 7000
//	----
//	delete-before 100
//	  segment 0: retention.ms: newest record 1500 ms old > 1000
//
//	plan-compact now=10000 policy=compact
//	0 100 1000 5000
//	100 200 1000 6000
//	200 250 500 7000
//	----
//	compact below 200
//	  dirty ratio 1.00 >= min.cleanable.dirty.ratio 0.5 (2000 dirty of 2000 bytes); clean up to 200
//
// If a script test fails, run `go test ./retention -run TestPolicyScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.

// parseSegments reads "base next size maxTimestamp" lines; the last
// segment is the active one.
func parseSegments(c *script.Case) []log.SegmentInfo {
	c.T.Helper()
	var segs []log.SegmentInfo
	for _, l := range c.Input() {
		f := strings.Fields(l)
		if len(f) != 4 {
			c.Fatalf("segment line %q: want base next size ts", l)
		}
		var n [4]int64
		for i := range f {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				c.Fatalf("%q: %v", l, err)
			}
			n[i] = v
		}
		segs = append(segs, log.SegmentInfo{BaseOffset: n[0], NextOffset: n[1], Size: n[2], MaxTimestamp: n[3]})
	}
	if len(segs) > 0 {
		segs[len(segs)-1].Active = true
	}
	return segs
}

// cleanupArgs builds a CleanupConfig from policy=, retention.ms=, ...
func cleanupArgs(c *script.Case) log.CleanupConfig {
	c.T.Helper()
	var cfg log.CleanupConfig
	for _, p := range splitList(c.Str("policy", "")) {
		switch p {
		case "delete":
			cfg.Delete = true
		case "compact":
			cfg.Compact = true
		default:
			c.Fatalf("policy %q", p)
		}
	}
	cfg.RetentionMs = c.Int("retention.ms", -1)
	cfg.RetentionBytes = c.Int("retention.bytes", -1)
	cfg.MinCompactionLagMs = c.Int("min.compaction.lag.ms", 0)
	cfg.MaxCompactionLagMs = c.Int("max.compaction.lag.ms", 0)
	cfg.MinCleanableDirtyRatio = 0.5
	if v, ok := c.Arg("min.cleanable.dirty.ratio"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.Fatalf("%v", err)
		}
		cfg.MinCleanableDirtyRatio = f
	}
	return cfg
}

func TestPolicyScripts(t *testing.T) {
	plan := func(c *script.Case) string {
		segs := parseSegments(c)
		var end int64
		if len(segs) > 0 {
			end = segs[len(segs)-1].NextOffset
		}
		offs := log.Offsets{LogStart: c.Int("start", 0), HighWatermark: c.Int("hw", end), LogEnd: end}
		offs.LastStable = c.Int("lso", offs.HighWatermark)
		var acts []Action
		switch c.Cmd {
		case "plan":
			acts = PlanDelete(segs, offs, cleanupArgs(c), c.Int("now", 0))
		case "plan-compact":
			acts = PlanCompact(segs, offs, cleanupArgs(c), c.Int("first-dirty", 0), c.Int("now", 0))
		}
		if len(acts) == 0 {
			return "nothing"
		}
		var b strings.Builder
		for _, a := range acts {
			switch a.Kind {
			case ActionDeleteBefore:
				fmt.Fprintf(&b, "%s %d\n", a.Kind, a.Offset)
			case ActionCompact:
				fmt.Fprintf(&b, "compact below %d\n", a.Offset)
			default:
				fmt.Fprintf(&b, "%s\n", a.Kind)
			}
			for _, r := range a.Reasons {
				fmt.Fprintf(&b, "  %s\n", r)
			}
		}
		return b.String()
	}
	script.Run(t, "testdata/*.txt", func(*testing.T) script.Commands {
		return script.Commands{"plan": plan, "plan-compact": plan}
	})
}
