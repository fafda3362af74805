package protocol

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request log lines carry the request's API (its name), version,
// correlation ID and client ID, on the connection's logger, which carries
// the connection: a number unique in this process ("conn") and the
// client's address ("remote"). Failures log at WARN or ERROR; with
// log.level=debug every request also logs one "request" line when its
// handler returns.

// connSeq numbers connections.
var connSeq atomic.Uint64

// reqAttrs are a request's attributes for a log line.
func reqAttrs(key, version int16, corr int32, clientID *string) []any {
	cid := ""
	if clientID != nil {
		cid = *clientID
	}
	return []any{"api", kmsg.NameForKey(key), "version", version, "correlation_id", corr, "client_id", cid}
}

// logRequest writes the DEBUG line of a handled request.
func (c *conn) logRequest(p *pending, version int16) {
	if !c.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	c.log.Debug("request", append(reqAttrs(p.key, version, p.corr, p.clientID), "took", time.Since(p.start).Round(time.Microsecond))...)
}
