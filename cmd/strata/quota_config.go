package main

import (
	"fmt"
	"strconv"

	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/protocol"
)

// Client quotas' measurement window (protocol/quotas.go). The quotas
// themselves are dynamic: AlterClientQuotas (kafka-configs --alter
// --entity-type users/clients/ips) sets them in the replicated metadata.
var quotaSettings = []setting{
	{"quota.window.num", "11", "Samples a client quota's rate is measured over (Kafka's name and default). A fresh client is measured over at least num-1 windows: it may send that many windows' worth of its quota before the first throttle. 1..1000."},
	{"quota.window.size.seconds", "1", "Length of one quota sample in seconds (Kafka's name and default). 1..3600."},
}

// quotaConfig is the parsed window.
type quotaConfig struct {
	Window quota.Window
}

func (q quotaConfig) apply(pc *protocol.Config) { pc.QuotaWindow = q.Window }

func parseQuotaSettings(merged map[string]rawValue, cfg *Config) error {
	intIn := func(name string, lo, hi int64) (int64, error) {
		rv := merged[name]
		n, err := strconv.ParseInt(rv.value, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%w: invalid value %q for %s (from %s): must be an integer between %d and %d", errConfig, rv.value, name, rv.origin, lo, hi)
		}
		return n, nil
	}
	num, err := intIn("quota.window.num", 1, 1000)
	if err != nil {
		return err
	}
	size, err := intIn("quota.window.size.seconds", 1, 3600)
	if err != nil {
		return err
	}
	// One sample (Kafka allows it) is measured as two: the rate needs a
	// window behind the current one.
	cfg.Quotas.Window = quota.Window{Samples: int(max(num, 2)), SizeMs: size * 1000}
	return nil
}
