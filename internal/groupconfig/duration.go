package groupconfig

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// isoDuration is the form Java's Duration.parse accepts (what Kafka's
// by_duration uses): an optional sign, P, days, then T with hours,
// minutes and seconds with up to nine fraction digits; each number may
// carry its own sign; letters in either case.
var isoDuration = regexp.MustCompile(`^(?i)([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// ParseISODuration parses an ISO-8601 duration as Java's Duration.parse
// does (PnDTnHnMn.nS: no years, months or weeks) and returns it in
// milliseconds, truncated toward zero. false when it does not parse or
// overflows.
func ParseISODuration(s string) (int64, bool) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	days, tPart, hours, mins, secs, frac := m[2], m[3], m[4], m[5], m[6], m[7]
	if days == "" && tPart == "" {
		return 0, false // "P" alone
	}
	if tPart != "" && hours == "" && mins == "" && secs == "" {
		return 0, false // "T" with nothing after it
	}
	var total int64 // milliseconds
	add := func(num string, unitMs int64) bool {
		if num == "" {
			return true
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return false
		}
		if n != 0 && (n > math.MaxInt64/unitMs || n < math.MinInt64/unitMs) {
			return false
		}
		v := n * unitMs
		if (v > 0 && total > math.MaxInt64-v) || (v < 0 && total < math.MinInt64-v) {
			return false
		}
		total += v
		return true
	}
	if !add(days, 86400000) || !add(hours, 3600000) || !add(mins, 60000) || !add(secs, 1000) {
		return 0, false
	}
	if frac != "" {
		f := (frac + "000")[:3] // milliseconds; finer digits truncate
		n, _ := strconv.ParseInt(f, 10, 64)
		if strings.HasPrefix(secs, "-") {
			n = -n
		}
		if (n > 0 && total > math.MaxInt64-n) || (n < 0 && total < math.MinInt64-n) {
			return 0, false
		}
		total += n
	}
	if m[1] == "-" {
		if total == math.MinInt64 {
			return 0, false
		}
		total = -total
	}
	return total, true
}
