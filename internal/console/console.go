// Package console is the web console the broker serves at /ui on its
// operators' HTTP listener (metrics.listener): plain HTML, CSS and
// JavaScript embedded in the binary (no build step), and a small JSON API
// under /ui/api/ that answers from a Kafka admin client connected to the
// broker's own Kafka listener, so it shows exactly what clients see,
// and from the broker's Prometheus registry (Raft and share-group counts).
//
// It is read-only unless the operator sets strata.console.admin.enable;
// even then admin actions (reset offsets, delete a group, resume a paused
// share group, redrive dead letters) from any address but loopback need a
// SCRAM user's name and password (HTTP basic auth) and, with ACLs on, the
// Kafka ACLs the action's requests need (auth.go). The actions
// themselves are the CLI's code paths, handed in as Actions by
// cmd/strata.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed assets
var assets embed.FS

// Actions are the admin actions, implemented by the CLI's code (cmd/strata)
// so that the console and `strata group` / `strata share-group` do the same
// thing. Each returns the text the CLI would print. A nil action is not
// offered.
type Actions struct {
	// ResetOffsets plans (execute false) or commits (execute true) new
	// offsets of a consumer group on one topic; to is earliest, latest,
	// offset:N, shift:N or datetime:TIME.
	ResetOffsets func(ctx context.Context, adm *kadm.Client, group, topic, to string, execute bool) (string, error)
	// DeleteGroup deletes an empty consumer group (share false) or share
	// group (share true).
	DeleteGroup func(ctx context.Context, adm *kadm.Client, group string, share bool) (string, error)
	// ResumeShare lifts the dead-letter flood guard's pause of a share group.
	ResumeShare func(ctx context.Context, group string) (string, error)
	// Redrive plans (execute false) or does (execute true) the
	// re-publishing of a share group's dead letters (reason "" = all).
	Redrive func(ctx context.Context, group, reason string, execute bool) (string, error)
}

// Options configure a Console.
type Options struct {
	// Bootstrap is the broker's own Kafka listener, host:port.
	Bootstrap string
	// ClientOpts give the console's Kafka clients the broker's identity
	// on that listener (TLS, SASL); nil: PLAINTEXT, anonymous.
	ClientOpts []kgo.Opt
	// NodeID is the broker's node ID: its own row of the Raft view is
	// read from Gatherer, the others' from their consoles.
	NodeID int32
	// Gatherer is the broker's metrics registry; nil: no Raft or share
	// counts.
	Gatherer prometheus.Gatherer
	// Admin turns on the admin actions; Auth says who may run them.
	Admin   bool
	Actions Actions
	Auth    Auth
	// SampleEvery is the lag history's sampling period (default 15 s);
	// HistorySpan how far back it keeps (default an hour); MaxSeries its
	// limit of group partitions (default DefaultMaxSeries).
	SampleEvery time.Duration
	HistorySpan time.Duration
	MaxSeries   int
	// RateWindow is the sliding window of growth and drain estimates
	// (the broker's strata.metrics.lag.window.ms).
	RateWindow time.Duration
	// Lazy starts the lag sampler at the first request to /ui rather
	// than at New: a broker whose console nobody opens spends nothing.
	Lazy   bool
	Logger *slog.Logger
}

// Console serves /ui. Close it to stop its sampler and client.
type Console struct {
	opts Options
	cl   *kgo.Client
	adm  *kadm.Client
	hist *History
	log  *slog.Logger
	mux  *http.ServeMux

	gatherMu  sync.Mutex
	gathered  time.Time
	gatherOut map[string][]sample // by metric name, cached for gatherTTL

	raft raftState // the Raft view's readings and peer addresses (raft.go)

	stop    context.CancelFunc
	ctx     context.Context
	once    sync.Once
	started atomic.Bool
	done    chan struct{}
}

// gatherTTL bounds how often the console walks the broker's registry:
// a page refreshing every two seconds costs at most one gather per TTL.
const gatherTTL = 5 * time.Second

// New connects to the broker's listener and starts the lag sampler.
func New(opts Options) (*Console, error) {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 15 * time.Second
	}
	if opts.HistorySpan <= 0 {
		opts.HistorySpan = time.Hour
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	if opts.RateWindow <= 0 {
		opts.RateWindow = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Bootstrap), kgo.ClientID("strata-console"),
		kgo.RetryTimeout(10 * time.Second), kgo.MetadataMinAge(time.Second)}, opts.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, cl: cl, adm: kadm.NewClient(cl), log: opts.Logger,
		hist: NewHistory(opts.HistorySpan, opts.SampleEvery, opts.MaxSeries, opts.RateWindow),
		done: make(chan struct{})}
	c.routes()
	c.ctx, c.stop = context.WithCancel(context.Background())
	if !opts.Lazy {
		c.startSampler()
	}
	return c, nil
}

func (c *Console) startSampler() {
	c.once.Do(func() {
		c.started.Store(true)
		go c.sampleLoop(c.ctx)
	})
}

// Close stops the sampler and the client.
func (c *Console) Close() {
	if c == nil {
		return
	}
	c.stop()
	c.once.Do(func() {}) // no sampler after Close
	if c.started.Load() {
		<-c.done
	}
	c.cl.Close()
}

// History is the console's lag history (for tests and benchmarks).
func (c *Console) History() *History { return c.hist }

// ServeHTTP serves /ui and /ui/...
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ui/api/raft/local" { // another broker's console asking: nobody opened this one
		c.startSampler()
	}
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/ui/", http.FileServerFS(static))
	m.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	m.Handle("GET /ui/", files)
	m.HandleFunc("GET /ui/api/info", c.api(c.info))
	m.HandleFunc("GET /ui/api/cluster", c.api(c.cluster))
	m.HandleFunc("GET /ui/api/raft", c.api(c.raftView))
	m.HandleFunc("GET /ui/api/raft/local", c.api(c.raftLocal))
	m.HandleFunc("GET /ui/api/topics", c.api(c.topics))
	m.HandleFunc("GET /ui/api/topics/{topic}", c.api(c.topic))
	m.HandleFunc("GET /ui/api/topics/{topic}/records", c.api(c.records))
	m.HandleFunc("GET /ui/api/groups", c.api(c.groups))
	m.HandleFunc("GET /ui/api/groups/{group}", c.api(c.group))
	m.HandleFunc("GET /ui/api/share-groups/{group}", c.api(c.shareGroup))
	m.HandleFunc("POST /ui/api/groups/{group}/reset-offsets", c.admin(c.resetOffsets))
	m.HandleFunc("POST /ui/api/groups/{group}/delete", c.admin(c.deleteGroup))
	m.HandleFunc("POST /ui/api/share-groups/{group}/resume", c.admin(c.resumeShare))
	m.HandleFunc("POST /ui/api/share-groups/{group}/redrive", c.admin(c.redrive))
	c.mux = m
}

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(msg string) error { return &httpError{http.StatusBadRequest, msg} }
func notFound(msg string) error   { return &httpError{http.StatusNotFound, msg} }

// api wraps a handler that returns a value to encode as JSON; errors are
// {"error": "..."} with their status (502 for the broker's errors).
func (c *Console) api(h func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		timeout := 15 * time.Second
		if r.Method == http.MethodPost {
			timeout = 2 * time.Minute // a redrive moves batches in transactions
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		v, err := h(ctx, r)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			status := http.StatusBadGateway
			var he *httpError
			if errors.As(err, &he) {
				status = he.status
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(v)
	}
}

// adminHeader must be on every admin request: a cross-site form cannot set
// it, and a cross-site script that sets it needs a CORS preflight the
// console never grants.
const adminHeader = "X-Strata-Console"

// adminAllowed says whether r may run admin actions, who asks, and why
// not (with the status to answer).
func (c *Console) adminAllowed(r *http.Request) (identity, int, string) {
	if !c.opts.Admin {
		return identity{}, http.StatusForbidden, "admin actions are off (strata.console.admin.enable=false)"
	}
	return c.authenticate(r)
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Console) admin(h func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, status, why := c.adminAllowed(r)
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			if status == http.StatusUnauthorized && r.Header.Get(adminHeader) == "" {
				// A script (curl): ask for basic auth. The page (which
				// sends the header) asks with its own form instead of
				// the browser's dialog.
				w.Header().Set("WWW-Authenticate", `Basic realm="strata console admin", charset="UTF-8"`)
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": why})
			return
		}
		if r.Header.Get(adminHeader) != "1" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"error": "admin requests need Content-Type application/json and " + adminHeader + ": 1"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		principal := id.principal
		if principal == "" {
			principal = "local operator (loopback)"
		}
		c.log.Info("console admin action", "path", r.URL.Path, "remote", r.RemoteAddr, "principal", principal)
		c.api(h)(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	}
}
