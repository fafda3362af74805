package retention

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/log"
)

// parseSegments reads "base next size maxTimestamp" lines; the last
// segment is the active one.
func parseSegments(t *testing.T, c scriptCase) []log.SegmentInfo {
	t.Helper()
	var segs []log.SegmentInfo
	for _, l := range c.input {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("line %d: segment line %q: want base next size ts", c.line, l)
		}
		var n [4]int64
		for i := range f {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				t.Fatalf("line %d: %q: %v", c.line, l, err)
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
func cleanupArgs(t *testing.T, c scriptCase) log.CleanupConfig {
	t.Helper()
	var cfg log.CleanupConfig
	for _, p := range splitList(c.args["policy"]) {
		switch p {
		case "delete":
			cfg.Delete = true
		case "compact":
			cfg.Compact = true
		default:
			t.Fatalf("line %d: policy %q", c.line, p)
		}
	}
	cfg.RetentionMs = intArg(t, c, "retention.ms", -1)
	cfg.RetentionBytes = intArg(t, c, "retention.bytes", -1)
	cfg.MinCompactionLagMs = intArg(t, c, "min.compaction.lag.ms", 0)
	cfg.MaxCompactionLagMs = intArg(t, c, "max.compaction.lag.ms", 0)
	cfg.MinCleanableDirtyRatio = 0.5
	if v, ok := c.args["min.cleanable.dirty.ratio"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("line %d: %v", c.line, err)
		}
		cfg.MinCleanableDirtyRatio = f
	}
	return cfg
}

func TestPolicyScripts(t *testing.T) {
	runScripts(t, "*.txt", func(t *testing.T, c scriptCase) string {
		switch c.cmd {
		case "plan", "plan-compact":
			segs := parseSegments(t, c)
			var end int64
			if len(segs) > 0 {
				end = segs[len(segs)-1].NextOffset
			}
			offs := log.Offsets{LogStart: intArg(t, c, "start", 0), HighWatermark: intArg(t, c, "hw", end), LogEnd: end}
			offs.LastStable = intArg(t, c, "lso", offs.HighWatermark)
			var acts []Action
			switch c.cmd {
			case "plan":
				acts = PlanDelete(segs, offs, cleanupArgs(t, c), intArg(t, c, "now", 0))
			case "plan-compact":
				acts = PlanCompact(segs, offs, cleanupArgs(t, c), intArg(t, c, "first-dirty", 0), intArg(t, c, "now", 0))
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
		t.Fatalf("line %d: unknown command %q", c.line, c.cmd)
		return ""
	})
}
