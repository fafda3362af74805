package raftconf

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is the hclog.Logger raft writes to, turned into slog records
// of the broker's logger (JSON or text, log.format): raft's message with
// its key-value pairs as attributes, no second timestamp or level inside
// the message. Raft logs normal operation at WARN (every election starts
// with "heartbeat timeout reached, starting election", a healthy single
// node's start and every topic creation included); those lines are
// re-levelled here (raftLevels): an election logs one line when it is won,
// with the group's term ("raft leader elected"), at electionLevel -- INFO
// for the metadata group, DEBUG for partition groups, of which a topic
// creation elects thousands -- and the steps before it at DEBUG. What
// signals trouble (a leader losing its quorum, failing to contact a
// follower, storage errors) keeps raft's level.
type raftLogger struct {
	l             *slog.Logger
	electionLevel slog.Level
	args          []any // hclog.With's, for ImpliedArgs
	name          string
}

// NewLogger returns the hclog.Logger for a raft.Config (Logger) that
// writes to l, an election's result at electionLevel (above).
func NewLogger(l *slog.Logger, electionLevel slog.Level) hclog.Logger {
	return newRaftLogger(l, electionLevel)
}

func newRaftLogger(l *slog.Logger, electionLevel slog.Level) *raftLogger {
	return &raftLogger{l: l, electionLevel: electionLevel}
}

// raftLevels maps raft's messages of normal operation to their level:
// levelElection is the logger's electionLevel.
const levelElection = slog.Level(-100)

var raftLevels = map[string]slog.Level{
	"election won": levelElection,

	"heartbeat timeout reached, starting election":               slog.LevelDebug,
	"entering candidate state":                                   slog.LevelDebug,
	"entering leader state":                                      slog.LevelDebug,
	"entering follower state":                                    slog.LevelDebug,
	"pre-vote successful, starting election":                     slog.LevelDebug,
	"pre-vote campaign failed, waiting for election timeout":     slog.LevelDebug,
	"Election timeout reached, restarting election":              slog.LevelInfo,
	"new leader elected, stepping down":                          slog.LevelDebug,
	"initial configuration":                                      slog.LevelDebug,
	"added peer, starting replication":                           slog.LevelDebug,
	"updating peer":                                              slog.LevelDebug,
	"removed peer, stopping replication":                         slog.LevelInfo,
	"updating configuration":                                     slog.LevelDebug,
	"duplicate requestVote for same term":                        slog.LevelDebug,
	"duplicate requestVote from":                                 slog.LevelDebug,
	"rejecting vote request since we have a leader":              slog.LevelDebug,
	"rejecting pre-vote request since we have a leader":          slog.LevelDebug,
	"rejecting vote request since our last term is greater":      slog.LevelDebug,
	"rejecting vote request since our last index is greater":     slog.LevelDebug,
	"rejecting pre-vote request since our last term is greater":  slog.LevelDebug,
	"rejecting pre-vote request since our last index is greater": slog.LevelDebug,
	"skipping application of old log":                            slog.LevelDebug,
	"failed to get previous log":                                 slog.LevelDebug, // a follower being caught up
	"previous log term mis-match":                                slog.LevelDebug,
	"clearing log suffix":                                        slog.LevelInfo,
	"no known peers, aborting election":                          slog.LevelDebug,
	"copied to local snapshot":                                   slog.LevelDebug,
	"Installed remote snapshot":                                  slog.LevelInfo,
	"starting snapshot up to":                                    slog.LevelDebug,
	"snapshot complete up to":                                    slog.LevelDebug,
	"compacting logs":                                            slog.LevelDebug,
	"snapshot restore progress":                                  slog.LevelDebug,
	"restored from snapshot":                                     slog.LevelDebug,
	"starting restore from snapshot":                             slog.LevelDebug,
	"snapshot network transfer progress":                         slog.LevelDebug,
	"pipelining replication":                                     slog.LevelDebug,
	"aborting pipeline replication":                              slog.LevelDebug,
}

// raftFloor is the lowest level of raft's own that is passed on: its
// INFO and DEBUG lines are chatty (every pipeline, snapshot and peer
// change) unless raftLevels names them.
const raftFloor = slog.LevelWarn

func (r *raftLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	lv := slog.LevelInfo
	switch level {
	case hclog.Trace, hclog.Debug:
		lv = slog.LevelDebug
	case hclog.Warn:
		lv = slog.LevelWarn
	case hclog.Error:
		lv = slog.LevelError
	}
	if m, ok := raftLevels[msg]; ok {
		lv = m
		if lv == levelElection {
			lv, msg = r.electionLevel, "raft leader elected"
		}
	} else if lv < raftFloor {
		return
	}
	ctx := context.Background()
	if !r.l.Enabled(ctx, lv) {
		return
	}
	a := attrs(args)
	if lv >= slog.LevelWarn {
		if peer, ok := peerOf(args); ok {
			suppressed, emit := raftRepeats.allow(r.electionLevel, msg, peer)
			if !emit {
				return
			}
			if suppressed > 0 {
				a = append(a, "suppressed", suppressed)
			}
		}
	}
	r.l.Log(ctx, lv, msg, a...)
}

// A dead or unreachable peer makes every raft group with a replica on it
// log the same failure (failed to heartbeat to, failed to contact, failed
// to make requestVote RPC, ...) at every retry: thousands of lines a
// second on a broker with many partitions. A WARN or ERROR line naming a
// peer is logged once per repeatWindow for its message and peer, broker-
// wide (the metadata group apart from the partitions); the next one says
// how many were suppressed meanwhile ("suppressed").
const repeatWindow = 10 * time.Second

var raftRepeats = &repeatLimiter{now: time.Now, last: map[repeatKey]*repeatEntry{}}

type repeatKey struct {
	metadata bool
	msg      string
	peer     string
}

type repeatEntry struct {
	at         time.Time
	suppressed int
}

type repeatLimiter struct {
	mu   sync.Mutex
	now  func() time.Time           // protected by mu (tests replace it)
	last map[repeatKey]*repeatEntry // protected by mu
}

// allow reports whether a line may be logged now, and how many like it
// were suppressed since the last one.
func (l *repeatLimiter) allow(electionLevel slog.Level, msg, peer string) (int, bool) {
	k := repeatKey{metadata: electionLevel == slog.LevelInfo, msg: msg, peer: peer}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e := l.last[k]
	if e != nil && now.Sub(e.at) < repeatWindow {
		e.suppressed++
		return 0, false
	}
	if e == nil {
		if len(l.last) >= 4096 { // bounded: forget the quiet ones
			for k, o := range l.last {
				if now.Sub(o.at) >= repeatWindow {
					delete(l.last, k)
				}
			}
		}
		e = &repeatEntry{}
		l.last[k] = e
	}
	n := e.suppressed
	e.at, e.suppressed = now, 0
	return n, true
}

// peerOf finds the peer a raft line is about.
func peerOf(args []interface{}) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "peer", "target", "server-id", "from", "candidate":
			return fmt.Sprint(args[i+1]), true
		}
	}
	return "", false
}

// attrs turns hclog's key-value pairs into slog's: keys with '-' get '_',
// values print as strings where they are Stringers or errors (raft passes
// its *Raft, whose String is "Node at <addr> [<state>]": dropped, the
// logger names the group already).
func attrs(args []interface{}) []any {
	out := make([]any, 0, len(args))
	for i := 0; i+1 < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprint(args[i])
		}
		v := args[i+1]
		switch k {
		case "node", "leader", "follower":
			if _, ok := v.(fmt.Stringer); ok {
				continue
			}
		}
		switch x := v.(type) {
		case error:
			v = x.Error()
		case hclog.Format:
			if len(x) > 0 {
				if f, ok := x[0].(string); ok {
					v = fmt.Sprintf(f, x[1:]...)
				}
			}
		case fmt.Stringer:
			v = x.String()
		}
		out = append(out, strings.ReplaceAll(k, "-", "_"), v)
	}
	if len(args)%2 == 1 {
		out = append(out, "extra", fmt.Sprint(args[len(args)-1]))
	}
	return out
}

func (r *raftLogger) Trace(msg string, args ...interface{}) { r.Log(hclog.Trace, msg, args...) }
func (r *raftLogger) Debug(msg string, args ...interface{}) { r.Log(hclog.Debug, msg, args...) }
func (r *raftLogger) Info(msg string, args ...interface{})  { r.Log(hclog.Info, msg, args...) }
func (r *raftLogger) Warn(msg string, args ...interface{})  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLogger) Error(msg string, args ...interface{}) { r.Log(hclog.Error, msg, args...) }

func (r *raftLogger) IsTrace() bool { return false }
func (r *raftLogger) IsDebug() bool { return r.l.Enabled(context.Background(), slog.LevelDebug) }
func (r *raftLogger) IsInfo() bool  { return r.l.Enabled(context.Background(), slog.LevelInfo) }
func (r *raftLogger) IsWarn() bool  { return r.l.Enabled(context.Background(), slog.LevelWarn) }
func (r *raftLogger) IsError() bool { return r.l.Enabled(context.Background(), slog.LevelError) }

func (r *raftLogger) ImpliedArgs() []interface{} { return r.args }

func (r *raftLogger) With(args ...interface{}) hclog.Logger {
	c := *r
	c.l = r.l.With(attrs(args)...)
	c.args = append(append([]interface{}{}, r.args...), args...)
	return &c
}

func (r *raftLogger) Name() string { return r.name }

func (r *raftLogger) Named(name string) hclog.Logger {
	c := *r
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	c.l = r.l.With("raft_logger", name)
	return &c
}

func (r *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	c.l = r.l.With("raft_logger", name)
	return &c
}

// SetLevel is ignored: the broker's log.level applies.
func (r *raftLogger) SetLevel(hclog.Level) {}

func (r *raftLogger) GetLevel() hclog.Level {
	if r.IsDebug() {
		return hclog.Debug
	}
	return hclog.Info
}

func (r *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

func (r *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(r.l.Handler(), slog.LevelWarn).Writer()
}
