package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/protocol"
	"github.com/strata-io/strata/retention"
	"github.com/strata-io/strata/txncoord"
)

// errConfig marks a configuration error: start-up fails with exit code 2.
var errConfig = errors.New("strata: configuration error")

// envPrefix names the environment variables that carry settings:
// STRATA_LOG_DIRS is log.dirs (upper case, dots as underscores).
const envPrefix = "STRATA_"

// toolEnv are environment variables with envPrefix that are not settings:
// the test suite's and the tools' own (README, "Tests"), which a
// developer's shell or CI exports. serve ignores them rather than
// refusing to start on an unknown setting.
var toolEnv = []string{
	"STRATA_KAFKA_CLASSPATH", "STRATA_PYTHON_VENV", "STRATA_METRICS_URL",
	"STRATA_CHAOS_", "STRATA_STABILITY_", "STRATA_SHARE_", "STRATA_BENCH_", "STRATA_JAVA_",
	"STRATA_FAULTS_",  // faultinject.go (test only)
	"STRATA_CONSOLE_", // the console tests' screenshots and benchmark (.ci/run exports STRATA_CONSOLE_ARTIFACTS)
	"STRATA_SEED", "STRATA_OUTAGE_SECONDS", "STRATA_SCRAPE_", "STRATA_IDLE_", "STRATA_RAFT_MEASURE",
	"STRATA_DLQ_", // the redrive test's kill point
	// The CLI's own (admin commands, strata user).
	"STRATA_BOOTSTRAP_SERVER", "STRATA_USER_PASSWORD",
}

func isToolEnv(k string) bool {
	for _, p := range toolEnv {
		if k == p || (strings.HasSuffix(p, "_") && strings.HasPrefix(k, p)) {
			return true
		}
	}
	return false
}

// Listener is one parsed listener (NAME://host:port).
type Listener struct {
	Name string // the listener's name (listener.security.protocol.map gives its protocol)
	Host string // "" = every interface
	Port int
}

func (l Listener) String() string {
	return l.Name + "://" + net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// Config is the broker's whole configuration after flags, environment,
// properties file and defaults are merged.
type Config struct {
	NodeID                   int32
	Listener                 Listener
	Advertised               Listener
	LogDirs                  []string // only the first is used (documented)
	NumPartitions            int32
	DefaultReplicationFactor int16
	AutoCreateTopics         bool
	DeleteTopicEnable        bool
	SocketRequestMaxBytes    int32
	Rack                     string
	LogLevel                 slog.Level
	// IdleAfter and IdleTimerSlack are strata.idle.after.ms and
	// strata.idle.timer.slack.ms (internal/procs).
	IdleAfter, IdleTimerSlack time.Duration
	// ShutdownTimeout is strata.shutdown.timeout.ms: how long SIGTERM may
	// take (shutdown.go).
	ShutdownTimeout time.Duration
	// BrokerProps holds every setting given explicitly (not defaulted), by
	// name: the topic-default synonyms retention understands, and the rest
	// for DescribeConfigs.
	BrokerProps map[string]string
	// Groups configures the group coordinator (group_config.go).
	Groups groupcoord.Config
	// GroupConfig is the broker settings behind group configs
	// (group.share.*, group.consumer.*: defaults and bounds), Share the
	// share-partition leader's and ShareVersion the share.version
	// setting (share_config.go).
	GroupConfig  groupconfig.Broker
	Share        protocol.ShareConfig
	ShareVersion int16
	// Txns configures the transaction coordinator (txn_config.go), and
	// ProducerIDExpiration(Check) the partitions' producer expiry.
	Txns                      txncoord.Config
	ProducerIDExpiration      time.Duration
	ProducerIDExpirationCheck time.Duration
	// Cluster is the metadata quorum (cluster_config.go).
	Cluster clusterConfig
	// Rebalance is the automatic leader balance (rebalance_config.go).
	Rebalance rebalanceConfig
	// Monitoring is the metrics/health HTTP listener (monitoring.go).
	Monitoring monitoringConfig
	// Limits are the Kafka listener's limits (limits_config.go).
	Limits limitsConfig
	// Quotas is the client quotas' window (quota_config.go).
	Quotas quotaConfig
	// ACLs is the authorizer (acl_config.go).
	ACLs aclConfig
	// Disk is what a full disk does (disk_config.go).
	Disk diskConfig
	// Security is every listener with its security (security_config.go);
	// Listener and Advertised are its first, the inter-broker listener.
	Security securityConfig
	// Warnings are logged once the logger exists (ignored settings).
	Warnings []string
}

// setting is one broker setting Strata understands, besides the
// topic-default synonyms in retention.
type setting struct {
	name string
	def  string
	doc  string
}

var settings = []setting{
	{"node.id", "1", "This broker's node ID (the data directory remembers it in meta.properties)."},
	{"broker.id", "", "Kafka's older name for node.id; must equal node.id if both are set."},
	{"listeners", "PLAINTEXT://127.0.0.1:9092", "Where to accept Kafka clients: NAME://host:port, comma-separated; each name's security protocol comes from listener.security.protocol.map (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). An empty host or 0.0.0.0 binds every interface."},
	{"advertised.listeners", "", "The addresses clients are told to connect to, NAME://host:port per listener; default: listeners. Required when listeners binds every interface."},
	{"log.dirs", "./data", "Data directories, comma-separated; only the first is used."},
	{"log.dir", "", "Kafka's single-directory form of log.dirs (log.dirs wins)."},
	{"num.partitions", "1", "Partitions of auto-created topics and of CreateTopics with -1."},
	{"default.replication.factor", "1", "Replication factor of auto-created topics and of CreateTopics with -1."},
	{"auto.create.topics.enable", "true", "Create unknown topics on Metadata and Produce requests."},
	{"delete.topic.enable", "true", "Allow DeleteTopics."},
	{"socket.request.max.bytes", "104857600", "Largest request frame accepted; larger frames close the connection."},
	{"broker.rack", "", "This broker's rack."},
	{"log.level", "info", "Log level: debug, info, warn or error (Strata-specific)."},
	{"strata.idle.after.ms", "10000", "After this long without client requests or replicated data the broker goes idle: its goroutines run on one scheduler P (GOMAXPROCS=1) and its threads get strata.idle.timer.slack.ms of kernel timer slack, which makes an idle broker with many partitions much cheaper; the next request restores both first (Strata-specific). 0 disables idle mode; so does the GOMAXPROCS environment variable. 0..3600000."},
	{"strata.idle.timer.slack.ms", "5", "Kernel timer slack of an idle broker's threads (Linux; needs CAP_SYS_NICE, without it idle mode uses one P only; Strata-specific). 0..100."},
	{"strata.shutdown.timeout.ms", "20000", "How long a shutdown (SIGTERM, SIGINT) may take, whatever state Raft and the clients are in: requests in flight are answered or their connections closed, leaderships handed over and the logs flushed within it; past it the broker logs what it was still waiting for and exits with status 3 (Strata-specific). 1000..3600000."},
}

// ignoredSettings are Kafka broker settings that a stock server.properties
// carries but that mean nothing to Strata (yet): accepted, so that an
// operator's existing file works, with one warning each at start-up.
var ignoredSettings = map[string]bool{
	"controller.quorum.bootstrap.servers": true, "controller.listener.names": true,
	"num.network.threads": true, "num.io.threads": true, "socket.send.buffer.bytes": true, "socket.receive.buffer.bytes": true,
	"num.recovery.threads.per.data.dir":                true,
	"transaction.state.log.min.isr":                    true,
	"share.coordinator.state.topic.replication.factor": true, "share.coordinator.state.topic.min.isr": true,
}

var settingByName = func() map[string]*setting {
	settings = append(settings, groupSettings...)
	settings = append(settings, shareSettings...)
	settings = append(settings, txnSettings...)
	settings = append(settings, clusterSettings...)
	settings = append(settings, rebalanceSettings...)
	settings = append(settings, monitoringSettings...)
	settings = append(settings, limitSettings...)
	settings = append(settings, quotaSettings...)
	settings = append(settings, aclSettings...)
	settings = append(settings, diskSettings...)
	settings = append(settings, securitySettings...)
	settings = append(settings, interBrokerSettings...)
	m := map[string]*setting{}
	for i := range settings {
		m[settings[i].name] = &settings[i]
	}
	return m
}()

func knownSetting(name string) bool {
	return settingByName[name] != nil || retention.IsBrokerSetting(name) || retention.IsCleanerSetting(name) || retention.IsLimitSetting(name) || ignoredSettings[name] || isSecuritySetting(name)
}

// rawValue is a setting's value and where it came from.
type rawValue struct {
	value  string
	origin string // "file server.properties:12", "environment STRATA_NODE_ID", "flag --set", "default"
}

// layer collects the values of one source; set reports unknown names.
type layer map[string]rawValue

func (l layer) set(name, value, origin string) error {
	if !knownSetting(name) {
		return fmt.Errorf("%w: unknown setting %q (from %s)", errConfig, name, origin)
	}
	l[name] = rawValue{value: value, origin: origin}
	return nil
}

// serveFlags are the parsed command-line flags of `strata serve`.
type serveFlags struct {
	configFile string
	flagLayer  layer
	help       bool
	setErr     error // the first error of a --set style flag, reported as is
}

func newServeFlagSet(out io.Writer) (*flag.FlagSet, *serveFlags) {
	sf := &serveFlags{flagLayer: layer{}}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	// The flag package's own messages are replaced by ours (one line naming
	// the setting); usage is printed only for --help.
	fs.SetOutput(io.Discard)
	fs.StringVar(&sf.configFile, "config", "", "a Kafka-style properties file (server.properties)")
	fs.Func("set", "set a setting: `name=value` (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return sf.keep(fmt.Errorf("%w: --set expects name=value, got %q", errConfig, s))
		}
		return sf.keep(sf.flagLayer.set(strings.TrimSpace(k), strings.TrimSpace(v), "flag --set "+strings.TrimSpace(k)))
	})
	for _, f := range []struct{ flag, name string }{
		{"listeners", "listeners"}, {"log-dirs", "log.dirs"}, {"node-id", "node.id"}, {"log-level", "log.level"},
	} {
		f := f
		fs.Func(f.flag, "same as --set "+f.name+"=`value`", func(s string) error {
			return sf.keep(sf.flagLayer.set(f.name, s, "flag --"+f.flag))
		})
	}
	fs.BoolFunc("pprof", "same as --set metrics.pprof.enable=true", func(s string) error {
		return sf.keep(sf.flagLayer.set("metrics.pprof.enable", s, "flag --pprof"))
	})
	fs.Usage = func() {}
	return fs, sf
}

func (sf *serveFlags) keep(err error) error {
	if err != nil && sf.setErr == nil {
		sf.setErr = err
	}
	return err
}

func serveUsage(out io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(out, "Usage: strata serve [flags]\n\nRun a broker. Settings use Kafka's names; precedence: flags > environment (%sNAME, e.g. %sLOG_DIRS) > --config file > defaults.\n\nFlags:\n", envPrefix, envPrefix)
	fs.PrintDefaults()
	fmt.Fprintf(out, "\nBroker settings:\n")
	for _, s := range settings {
		def := s.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(out, "  %-28s default %s\n      %s\n", s.name, def, s.doc)
	}
	fmt.Fprintf(out, "\nTopic defaults (broker synonyms of topic configs):\n  %s\n", strings.Join(retention.BrokerSettings(), "\n  "))
}

// loadConfig merges defaults < file < environment < flags and validates.
// Every error wraps errConfig and names the setting and where it came from.
func loadConfig(args []string, environ []string, readFile func(string) ([]byte, error), out io.Writer) (*Config, *serveFlags, error) {
	fs, sf := newServeFlagSet(out)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			sf.help = true
			fs.SetOutput(out)
			serveUsage(out, fs)
			return nil, sf, nil
		}
		if sf.setErr != nil {
			return nil, sf, sf.setErr
		}
		if !errors.Is(err, errConfig) {
			err = fmt.Errorf("%w: %v", errConfig, err)
		}
		return nil, sf, err
	}
	if fs.NArg() > 0 {
		return nil, sf, fmt.Errorf("%w: unexpected argument %q", errConfig, fs.Arg(0))
	}

	fileLayer := layer{}
	if sf.configFile != "" {
		data, err := readFile(sf.configFile)
		if err != nil {
			return nil, sf, fmt.Errorf("%w: read --config %s: %v", errConfig, sf.configFile, err)
		}
		props, err := parseProperties(data)
		if err != nil {
			return nil, sf, fmt.Errorf("%w: %s: %v", errConfig, sf.configFile, err)
		}
		for _, p := range props {
			if err := fileLayer.set(p.Key, strings.TrimSpace(p.Value), fmt.Sprintf("file %s:%d", sf.configFile, p.Line)); err != nil {
				return nil, sf, err
			}
		}
	}

	envLayer := layer{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix) || len(k) == len(envPrefix) || isToolEnv(k) {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(k[len(envPrefix):], "_", "."))
		if err := envLayer.set(name, strings.TrimSpace(v), "environment "+k); err != nil {
			return nil, sf, err
		}
	}

	merged := map[string]rawValue{}
	for _, s := range settings {
		if s.def != "" {
			merged[s.name] = rawValue{value: s.def, origin: "default"}
		}
	}
	explicit := map[string]rawValue{}
	for _, l := range []layer{fileLayer, envLayer, sf.flagLayer} {
		for k, v := range l {
			merged[k] = v
			explicit[k] = v
		}
	}
	cfg, err := buildConfig(merged, explicit)
	return cfg, sf, err
}

// buildConfig parses and cross-checks the merged values.
func buildConfig(merged, explicit map[string]rawValue) (*Config, error) {
	cfg := &Config{BrokerProps: map[string]string{}}
	steps := []func() error{
		func() error { return parseBrokerSettings(merged, explicit, cfg) },
		func() error { return parseTxnSettings(merged, cfg) },
		func() error { return parseGroupSettings(merged, cfg) },
		func() error { return parseShareSettings(merged, explicit, cfg) },
		func() error { return parseClusterSettings(merged, cfg) },
		func() error { return parseRebalanceSettings(merged, cfg) },
		func() error { return parseMonitoringSettings(merged, cfg) },
		func() error { return parseLimitSettings(merged, cfg) },
		func() error { return parseQuotaSettings(merged, cfg) },
		func() error { return parseACLSettings(merged, cfg) },
		func() error { return parseDiskSettings(merged, cfg) },
		func() error { return parseLogDirs(merged, explicit, cfg) },
		func() error { return parseSecuritySettings(merged, cfg) },
		func() error { return collectBrokerProps(explicit, cfg) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// parseBrokerSettings reads the broker's own settings: its ID, topic
// creation defaults, the request size limit, idle mode, shutdown and
// logging.
func parseBrokerSettings(merged, explicit map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	intIn := func(name string, lo, hi int64) (int64, error) { return intSetting(merged, name, lo, hi) }
	n, err := intIn("node.id", 0, 1<<31-1)
	if err != nil {
		return err
	}
	cfg.NodeID = int32(n)
	if _, ok := merged["broker.id"]; ok {
		bid, err := intIn("broker.id", 0, 1<<31-1)
		if err != nil {
			return err
		}
		if _, set := explicit["node.id"]; !set {
			cfg.NodeID = int32(bid)
		} else if int32(bid) != cfg.NodeID {
			return bad("broker.id", fmt.Sprintf("differs from node.id=%d", cfg.NodeID))
		}
	}
	if n, err = intIn("num.partitions", 1, 50000); err != nil {
		return err
	}
	cfg.NumPartitions = int32(n)
	if n, err = intIn("default.replication.factor", 1, 1<<15-1); err != nil {
		return err
	}
	cfg.DefaultReplicationFactor = int16(n)
	if n, err = intIn("socket.request.max.bytes", 1, 1<<31-1); err != nil {
		return err
	}
	cfg.SocketRequestMaxBytes = int32(n)
	if cfg.AutoCreateTopics, err = boolSetting(merged, "auto.create.topics.enable"); err != nil {
		return err
	}
	if cfg.DeleteTopicEnable, err = boolSetting(merged, "delete.topic.enable"); err != nil {
		return err
	}
	cfg.Rack = merged["broker.rack"].value
	if cfg.IdleAfter, err = msSetting(merged, "strata.idle.after.ms", 0, 3600000); err != nil {
		return err
	}
	if cfg.IdleTimerSlack, err = msSetting(merged, "strata.idle.timer.slack.ms", 0, 100); err != nil {
		return err
	}
	if cfg.ShutdownTimeout, err = msSetting(merged, "strata.shutdown.timeout.ms", 1000, 3600000); err != nil {
		return err
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(merged["log.level"].value)); err != nil {
		return bad("log.level", "expected debug, info, warn or error")
	}
	return nil
}

// parseLogDirs reads log.dirs (or log.dir, when only it is set).
func parseLogDirs(merged, explicit map[string]rawValue, cfg *Config) error {
	dirsName := "log.dirs"
	if _, set := explicit["log.dirs"]; !set {
		if _, set := explicit["log.dir"]; set {
			dirsName = "log.dir"
		}
	}
	for _, d := range strings.Split(merged[dirsName].value, ",") {
		if d = strings.TrimSpace(d); d != "" {
			cfg.LogDirs = append(cfg.LogDirs, d)
		}
	}
	if len(cfg.LogDirs) == 0 {
		return badSetting(merged, dirsName, "no directory given")
	}
	return nil
}

// collectBrokerProps checks the topic defaults and limits set explicitly
// (log.retention.hours, message.max.bytes, ...: retention checks them)
// and passes them on to the broker as given (secrets stay out of
// DescribeConfigs); Kafka settings Strata accepts but does not use are
// warned about.
func collectBrokerProps(explicit map[string]rawValue, cfg *Config) error {
	for name, rv := range explicit {
		if retention.IsBrokerSetting(name) {
			if err := retention.ValidateBrokerSetting(name, rv.value); err != nil {
				return fmt.Errorf("%w: %s (from %s): %v", errConfig, name, rv.origin, err)
			}
		}
		if retention.IsLimitSetting(name) {
			if err := retention.ValidateLimitSetting(name, rv.value); err != nil {
				return fmt.Errorf("%w: %s (from %s): %v", errConfig, name, rv.origin, err)
			}
		}
		if ignoredSettings[name] {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("setting %s (from %s) is accepted for compatibility with Kafka but not used by Strata", name, rv.origin))
		}
		if sensitiveSetting(name) {
			continue
		}
		cfg.BrokerProps[name] = rv.value
	}
	sort.Strings(cfg.Warnings)
	return nil
}

func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// sortedSettingNames lists every setting name accepted, for help output and
// tests.
func sortedSettingNames() []string {
	var names []string
	for _, s := range settings {
		names = append(names, s.name)
	}
	names = append(names, retention.BrokerSettings()...)
	sort.Strings(names)
	return names
}
