package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// monitoringSettings configure the operators' HTTP listener: Prometheus
// metrics, health and readiness, and pprof when asked for.
var monitoringSettings = append([]setting{
	{"metrics.listener", "", "host:port of the HTTP listener serving /metrics (Prometheus), /healthz and /readyz (Strata-specific); empty: none. Example: 127.0.0.1:9644."},
	{"metrics.pprof.enable", "false", "Also serve Go's profiler at /debug/pprof/ on metrics.listener (Strata-specific; --pprof sets it). Only on a trusted network."},
	{"strata.metrics.lag.window.ms", "300000", "Sliding window of the lag growth rate, consumption rate and time-to-drain series of consumer and share groups (Strata-specific). 1000..86400000."},
	{"log.format", "text", "Log line format: text (logfmt key=value) or json, one object per line (Strata-specific)."},
}, consoleSettings...)

// monitoringConfig is the parsed monitoring part of Config.
type monitoringConfig struct {
	Listener string // "" = no HTTP listener
	Pprof    bool
	// LogJSON: log.format=json.
	LogJSON bool
	// Console is the web console at /ui (console.go).
	Console consoleConfig
	// bound, if set, receives the listener's address (tests bind port 0).
	bound func(net.Addr)
}

func parseMonitoringSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	if l := merged["metrics.listener"].value; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return bad("metrics.listener", "expected host:port")
		}
		cfg.Monitoring.Listener = l
	}
	switch merged["metrics.pprof.enable"].value {
	case "true":
		cfg.Monitoring.Pprof = true
	case "false", "":
	default:
		return bad("metrics.pprof.enable", "expected true or false")
	}
	if cfg.Monitoring.Pprof && cfg.Monitoring.Listener == "" {
		return bad("metrics.pprof.enable", "needs metrics.listener")
	}
	if v := merged["strata.metrics.lag.window.ms"].value; v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 1000 || ms > 86400000 {
			return bad("strata.metrics.lag.window.ms", "expected milliseconds in 1000..86400000")
		}
		cfg.Groups.LagWindow = time.Duration(ms) * time.Millisecond
	}
	switch merged["log.format"].value {
	case "json":
		cfg.Monitoring.LogJSON = true
	case "text", "":
	default:
		return bad("log.format", "expected text or json")
	}
	return parseConsoleSettings(merged, cfg)
}

// monitor is the running HTTP listener. ready flips once the broker has
// loaded its metadata and the Kafka listener accepts connections.
type monitor struct {
	srv   *http.Server
	ready atomic.Bool
	ui    atomic.Value // http.Handler of the console, once started (console.go)
	addr  net.Addr     // the bound address
	done  chan struct{}
}

// startMonitor binds the listener and serves in the background; nil, nil
// when no listener is configured. It starts before the broker so /healthz
// answers (and /readyz says 503) while a quorum is being joined.
func startMonitor(cfg monitoringConfig, reg *prometheus.Registry, logger *slog.Logger) (*monitor, error) {
	if cfg.Listener == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Listener)
	if err != nil {
		return nil, fmt.Errorf("listen on metrics.listener %s: %w", cfg.Listener, err)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &monitor{done: make(chan struct{}), addr: ln.Addr()}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: 4, // a scrape walks every partition: don't let scrapers pile up
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/ui", m.serveUI)
	mux.HandleFunc("/ui/", m.serveUI)
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	m.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener failed", "err", err)
		}
	}()
	logger.Info("metrics listener up", "addr", ln.Addr().String(), "pprof", cfg.Pprof)
	if cfg.bound != nil {
		cfg.bound(ln.Addr())
	}
	return m, nil
}

// close stops the listener, letting scrapes in flight finish briefly.
func (m *monitor) close() {
	if m == nil {
		return
	}
	m.ready.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.srv.Shutdown(ctx)
	<-m.done
}

func (m *monitor) setReady(v bool) {
	if m != nil {
		m.ready.Store(v)
	}
}

// newLogger is the broker's logger: text (logfmt) or JSON lines by
// log.format, at log.level.
func newLogger(w io.Writer, cfg *Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.Monitoring.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
