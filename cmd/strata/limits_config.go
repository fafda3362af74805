package main

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/protocol"
)

// limitSettings are the Kafka listener's limits (protocol/limits.go):
// Kafka's names where Kafka has the setting, strata.* where it has none.
var limitSettings = []setting{
	{"max.connections", "10000", "Open client connections; one more is closed at once, with a log line. 1..1000000."},
	{"max.connections.per.ip", "", "Open client connections from one IP address; default: max.connections. 1..1000000."},
	{"connections.max.idle.ms", "600000", "A connection that sends no request for this long is closed. 1000..86400000."},
	{"queued.max.request.bytes", "268435456", "Request bytes held in memory by all client connections together; when spent, the broker stops reading requests until handlers finish (as Kafka mutes its sockets). Charged as bytes arrive, never from a length a client announces. -1: unbounded (Kafka's default). Otherwise at least socket.request.max.bytes."},
	{"strata.request.read.timeout.ms", "30000", "Once a request's first byte has arrived, the whole request must arrive within this, or the connection is closed (a client that announces a frame and stalls; Strata-specific). 100..3600000."},
	{"strata.response.write.timeout.ms", "60000", "A response must be written to the client within this, or the connection is closed: a client that stops reading releases what its responses hold (Strata-specific). 100..3600000."},
	{"strata.produce.backlog.check.interval.ms", "1000", "How often a broker recomputes the backlog of the topics it leads that set strata.produce.backlog.group and strata.produce.backlog.max.records; producing is refused or let through again at most this long after the group's backlog crosses the limit (Strata-specific). 10..60000."},
	{"strata.produce.max.partitions", "100000", "Topic-partitions one Produce request may name (a topic without partitions counts as one); a larger request closes the connection before it is decoded (Strata-specific). 1..10000000."},
}

// limitsConfig is the parsed limits (protocol.Config's fields).
type limitsConfig struct {
	MaxConnections, MaxConnectionsPerIP int
	ConnectionsMaxIdle                  time.Duration
	QueuedMaxRequestBytes               int64
	RequestReadTimeout                  time.Duration
	ResponseWriteTimeout                time.Duration
	ProduceMaxPartitions                int
	BacklogCheckInterval                time.Duration
}

// apply copies the limits into the listener's configuration.
func (l limitsConfig) apply(pc *protocol.Config) {
	pc.MaxConnections = l.MaxConnections
	pc.MaxConnectionsPerIP = l.MaxConnectionsPerIP
	pc.ConnectionsMaxIdle = l.ConnectionsMaxIdle
	pc.QueuedMaxRequestBytes = l.QueuedMaxRequestBytes
	pc.RequestReadTimeout = l.RequestReadTimeout
	pc.ResponseWriteTimeout = l.ResponseWriteTimeout
	pc.ProduceMaxPartitions = l.ProduceMaxPartitions
	pc.BacklogCheckInterval = l.BacklogCheckInterval
}

func parseLimitSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	intIn := func(name string, lo, hi int64) (int64, error) { return intSetting(merged, name, lo, hi) }
	l := &cfg.Limits
	n, err := intIn("max.connections", 1, 1000000)
	if err != nil {
		return err
	}
	l.MaxConnections = int(n)
	l.MaxConnectionsPerIP = l.MaxConnections
	if merged["max.connections.per.ip"].value != "" {
		if n, err = intIn("max.connections.per.ip", 1, 1000000); err != nil {
			return err
		}
		l.MaxConnectionsPerIP = int(n)
	}
	if n, err = intIn("connections.max.idle.ms", 1000, 86400000); err != nil {
		return err
	}
	l.ConnectionsMaxIdle = time.Duration(n) * time.Millisecond
	if n, err = intIn("queued.max.request.bytes", -1, 1<<40); err != nil {
		return err
	}
	if n == 0 || n > 0 && n < int64(cfg.SocketRequestMaxBytes) {
		return bad("queued.max.request.bytes", fmt.Sprintf("must be -1 or at least socket.request.max.bytes (%d)", cfg.SocketRequestMaxBytes))
	}
	l.QueuedMaxRequestBytes = n
	if n, err = intIn("strata.request.read.timeout.ms", 100, 3600000); err != nil {
		return err
	}
	l.RequestReadTimeout = time.Duration(n) * time.Millisecond
	if n, err = intIn("strata.response.write.timeout.ms", 100, 3600000); err != nil {
		return err
	}
	l.ResponseWriteTimeout = time.Duration(n) * time.Millisecond
	if n, err = intIn("strata.produce.max.partitions", 1, 10000000); err != nil {
		return err
	}
	l.ProduceMaxPartitions = int(n)
	if n, err = intIn("strata.produce.backlog.check.interval.ms", 10, 60000); err != nil {
		return err
	}
	l.BacklogCheckInterval = time.Duration(n) * time.Millisecond
	return nil
}
