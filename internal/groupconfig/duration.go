package groupconfig

import (
	"math"
	"strconv"
)

// ParseISODuration parses an ISO-8601 duration as Java's Duration.parse
// does (what Kafka's by_duration uses) and returns it in milliseconds,
// truncated toward zero; false when it does not parse or overflows. The
// form: an optional sign, P, days, then T with hours, minutes and seconds
// (seconds with up to nine fraction digits after '.' or ','), each number
// with its own optional sign, letters in either case, at least one part,
// no years, months or weeks. Hand-written rather than a regexp: Resolve
// runs it for every ShareFetch of a group that sets by_duration.
func ParseISODuration(s string) (int64, bool) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg, i = s[i] == '-', i+1
	}
	if i >= len(s) || s[i]|0x20 != 'p' {
		return 0, false
	}
	i++
	var total int64
	add := func(num string, unitMs int64) bool {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || (n != 0 && (n > math.MaxInt64/unitMs || n < math.MinInt64/unitMs)) {
			return false
		}
		v := n * unitMs
		if (v > 0 && total > math.MaxInt64-v) || (v < 0 && total < math.MinInt64-v) {
			return false
		}
		total += v
		return true
	}
	// number returns the end of a signed decimal number at j, or -1.
	number := func(j int) int {
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j {
			return -1
		}
		return k
	}
	parts := 0
	if i < len(s) && s[i]|0x20 != 't' {
		end := number(i)
		if end < 0 || end >= len(s) || s[end]|0x20 != 'd' || !add(s[i:end], 86400000) {
			return 0, false
		}
		i, parts = end+1, parts+1
	}
	if i < len(s) {
		if s[i]|0x20 != 't' {
			return 0, false
		}
		i++
		last, timeParts := 0, 0 // units in order: 1 hours, 2 minutes, 3 seconds
		for i < len(s) {
			end := number(i)
			if end < 0 {
				return 0, false
			}
			num, frac, dot := s[i:end], "", false
			j := end
			if j < len(s) && (s[j] == '.' || s[j] == ',') {
				k := j + 1
				for k < len(s) && s[k] >= '0' && s[k] <= '9' {
					k++
				}
				if k-(j+1) > 9 {
					return 0, false
				}
				frac, dot, j = s[j+1:k], true, k
			}
			if j >= len(s) {
				return 0, false
			}
			unit := 0
			switch s[j] | 0x20 {
			case 'h':
				unit = 1
			case 'm':
				unit = 2
			case 's':
				unit = 3
			}
			if unit <= last || (dot && unit != 3) {
				return 0, false
			}
			if !add(num, [4]int64{0, 3600000, 60000, 1000}[unit]) {
				return 0, false
			}
			if frac != "" {
				ms, _ := strconv.ParseInt((frac + "00")[:3], 10, 64) // finer digits truncate
				if num[0] == '-' {
					ms = -ms
				}
				if !add(strconv.FormatInt(ms, 10), 1) {
					return 0, false
				}
			}
			last, timeParts, i = unit, timeParts+1, j+1
		}
		if timeParts == 0 {
			return 0, false // "T" with nothing after it
		}
		parts += timeParts
	}
	if parts == 0 {
		return 0, false // "P" alone
	}
	if neg {
		if total == math.MinInt64 {
			return 0, false
		}
		total = -total
	}
	return total, true
}
