package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/internal/console"
	"github.com/strata-io/strata/internal/dlq"
)

// consoleSettings configure the web console at /ui on metrics.listener
// (internal/console).
var consoleSettings = []setting{
	{"strata.console.enable", "true", "Serve the web console at /ui on metrics.listener (Strata-specific)."},
	{"strata.console.admin.enable", "false", "Let the console reset offsets, delete groups, resume paused share groups and redrive dead letters: from loopback as the local operator, from elsewhere as a SCRAM user (HTTP basic auth) holding the Kafka ACLs the action needs when ACLs are on (Strata-specific)."},
	{"strata.console.admin.auth", "remote", "Which console admin requests must authenticate as a SCRAM user: remote (all but loopback's) or always (loopback's too: a shared host, or a proxy on the same host in front of the console) (Strata-specific)."},
	{"strata.console.lag.sample.ms", "15000", "How often the console samples every consumer group's lag for its last-hour sparklines (Strata-specific). 1000..600000."},
	{"strata.console.lag.history.max.series", "2000", "Most group partitions the console keeps a lag history of, about 2.6 KiB each at the default sampling (Strata-specific). 1..1000000."},
	{"strata.console.lag.history.eager", "false", "Sample lag from start-up; by default sampling starts when the console is first opened (Strata-specific)."},
}

// consoleConfig is the parsed console part of monitoringConfig.
type consoleConfig struct {
	Disabled    bool
	Admin       bool
	AuthAlways  bool // strata.console.admin.auth=always
	SampleEvery time.Duration
	MaxSeries   int
	Eager       bool
}

func parseConsoleSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	c := &cfg.Monitoring.Console
	for name, dst := range map[string]*bool{"strata.console.admin.enable": &c.Admin, "strata.console.lag.history.eager": &c.Eager} {
		switch merged[name].value {
		case "true":
			*dst = true
		case "false", "":
		default:
			return bad(name, "expected true or false")
		}
	}
	switch merged["strata.console.admin.auth"].value {
	case "always":
		c.AuthAlways = true
	case "remote", "":
	default:
		return bad("strata.console.admin.auth", "expected remote or always")
	}
	switch merged["strata.console.enable"].value {
	case "false":
		c.Disabled = true
	case "true", "":
	default:
		return bad("strata.console.enable", "expected true or false")
	}
	c.SampleEvery = 15 * time.Second
	if v := merged["strata.console.lag.sample.ms"].value; v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 1000 || ms > 600000 {
			return bad("strata.console.lag.sample.ms", "expected milliseconds in 1000..600000")
		}
		c.SampleEvery = time.Duration(ms) * time.Millisecond
	}
	c.MaxSeries = console.DefaultMaxSeries
	if v := merged["strata.console.lag.history.max.series"].value; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000000 {
			return bad("strata.console.lag.history.max.series", "expected 1..1000000")
		}
		c.MaxSeries = n
	}
	return nil
}

// serveUI hands /ui to the console once the broker is up (503 before).
func (m *monitor) serveUI(w http.ResponseWriter, r *http.Request) {
	h, _ := m.ui.Load().(http.Handler)
	if h == nil {
		http.Error(w, "the console starts with the broker", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// consoleBroker is what the console's admin gate reads of the broker:
// SCRAM credentials and ACL bindings (replication.Broker).
type consoleBroker interface {
	ScramCredential(user, mech string) (auth.ScramCredential, bool)
	ACLs() *acl.Set
}

// consoleAuthorizer is the authorizer that decides an authenticated
// console user's admin actions: the broker's own (authorizer.class.name),
// nil while ACLs are off.
func consoleAuthorizer(cfg *Config) *acl.Authorizer {
	return cfg.ACLs.Authorizer
}

// startConsole starts the console against the broker's own Kafka
// listener at kafkaAddr and mounts it on the monitor; nil when there is no
// monitor or the console is off. Close it with (*console.Console).Close
// (nil-safe).
func startConsole(cfg *Config, kafkaAddr net.Addr, reg prometheus.Gatherer, m *monitor, b consoleBroker, logger *slog.Logger) *console.Console {
	cc := cfg.Monitoring.Console
	if m == nil || cc.Disabled {
		return nil
	}
	boot := loopbackAddr(kafkaAddr)
	opts := cfg.Security.InterBroker.consoleOpts(cfg.Advertised.Host)
	c, err := console.New(console.Options{
		Bootstrap:  boot,
		ClientOpts: opts,
		NodeID:     cfg.NodeID,
		Gatherer:   reg,
		Admin:      cc.Admin,
		Actions:    consoleActions(boot, opts),
		Auth: console.Auth{Always: cc.AuthAlways, Credential: b.ScramCredential, Authorizer: consoleAuthorizer(cfg),
			ACLs: b.ACLs},
		SampleEvery: cc.SampleEvery,
		MaxSeries:   cc.MaxSeries,
		RateWindow:  cfg.Groups.LagWindow,
		Lazy:        !cc.Eager,
		Logger:      logger,
	})
	if err != nil {
		logger.Warn("console not started", "err", err)
		return nil
	}
	m.ui.Store(http.Handler(c))
	logger.Info("console at /ui", "admin", cc.Admin)
	return c
}

// advertiseConsole sets metrics.listener, as DescribeConfigs reports it
// for this broker, to the listener's bound address (a port 0 resolved):
// the console on another broker finds this one's Raft figures there
// (internal/console/raft.go).
func advertiseConsole(cfg *Config, m *monitor) {
	if m != nil && m.addr != nil {
		cfg.BrokerProps["metrics.listener"] = m.addr.String()
	}
}

// loopbackAddr is addr with an unspecified host (0.0.0.0, ::) replaced by
// loopback: the console dials its own broker.
func loopbackAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// consoleActions are the console's admin actions: the CLI's own functions
// (group.go, share_group.go, share_resume.go, dlq.go), their output returned as
// the text the CLI prints.
func consoleActions(boot string, opts []kgo.Opt) console.Actions {
	return console.Actions{
		ResetOffsets: func(ctx context.Context, adm *kadm.Client, group, topic, to string, execute bool) (string, error) {
			ro := resetOptions{group: group, topic: topic, execute: execute}
			kind, arg, _ := strings.Cut(to, ":")
			switch kind {
			case "earliest":
				ro.earliest = true
			case "latest":
				ro.latest = true
			case "offset":
				ro.offset = arg
			case "shift":
				ro.shift = arg
			case "datetime":
				ro.datetime = arg
			default:
				return "", fmt.Errorf("%w: reset to %q: expected earliest, latest, offset:N, shift:N or datetime:TIME", errConfig, to)
			}
			var out bytes.Buffer
			err := groupReset(ctx, adm, ro, &out)
			return out.String(), err
		},
		DeleteGroup: func(ctx context.Context, adm *kadm.Client, group string, share bool) (string, error) {
			var out bytes.Buffer
			var err error
			if share {
				err = shareDelete(ctx, adm, group, &out)
			} else {
				err = consumerGroupDelete(ctx, adm, group, &out)
			}
			return out.String(), err
		},
		Redrive: func(ctx context.Context, group, reason string, execute bool) (string, error) {
			o := dlq.Options{Seeds: []string{boot}, Opts: opts, Group: group, Reason: reason, Limit: dlq.DefaultLimit, Batch: 500, Execute: execute}
			rep, err := dlq.Redrive(ctx, o)
			var out bytes.Buffer
			if rep != nil {
				printRedrive(rep, o, &out)
			}
			return out.String(), err
		},
		ResumeShare: func(ctx context.Context, group string) (string, error) {
			var out bytes.Buffer
			err := shareResume(ctx, &adminFlags{bootstrap: boot, timeout: 15 * time.Second, opts: opts}, group, &out)
			return out.String(), err
		},
	}
}

// consumerGroupDelete deletes an empty consumer group, as
// kafka-consumer-groups --delete does (the CLI has no delete of its own
// yet): a group with members is refused.
func consumerGroupDelete(ctx context.Context, adm *kadm.Client, group string, w *bytes.Buffer) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	l, ok := listed[group]
	switch {
	case !ok || l.GroupType == "share":
		return fmt.Errorf("group %q is not a consumer group: %w", group, kerr.GroupIDNotFound)
	case l.State != "Empty" && l.State != "":
		return fmt.Errorf("%w: consumer group %q is %s; stop its consumers first", errGroupActive, group, l.State)
	}
	resps, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		return err
	}
	r, ok := resps[group]
	if !ok {
		return fmt.Errorf("group %q: no answer", group)
	}
	if r.Err != nil {
		return fmt.Errorf("consumer group %q: %w", group, errMsg(r.Err, r.ErrMessage))
	}
	fmt.Fprintf(w, "Deleted consumer group %s.\n", group)
	return nil
}
