// Command strata runs a Strata broker and its operator tools.
//
//	strata serve [--config server.properties] [--set name=value]... [--listeners L] [--log-dirs D] [--node-id N] [--log-level L]
//	strata version
//	strata dev-cluster [--brokers 3] [--controllers K] [--dir D] [--port 19092] [--set name=value]...
//	strata debug dump-segment [--max-batches N] FILE.log
//	strata topic|broker|group|share-group|dlq|txn|bench|certs|user|acl|quota ...
//
// The admin commands speak the Kafka protocol to any broker; `strata help`
// lists them (usage in main.go) and `strata <command> help` their flags.
//
// # Configuration
//
// Settings use Kafka's names (node.id, listeners, advertised.listeners,
// log.dirs, num.partitions, default.replication.factor,
// auto.create.topics.enable, delete.topic.enable, socket.request.max.bytes,
// and every broker default of a topic config that the retention package
// knows: log.retention.hours, log.segment.bytes, log.roll.ms, message.max.bytes,
// log.flush.interval.messages, ...). They come from, highest precedence first:
//
//	flags        --set name=value (repeatable), --listeners, --log-dirs, --node-id, --log-level
//	environment  STRATA_<NAME>: upper case, dots as underscores (STRATA_LOG_DIRS, STRATA_NODE_ID)
//	file         --config FILE, Java .properties syntax (server.properties)
//	defaults
//
// An unknown setting (in any source, including any STRATA_* variable) or an
// invalid value fails start-up with exit status 2 and a message naming the
// setting and where it came from (file and line, variable, or flag).
// Kafka settings that a stock server.properties carries but that mean
// nothing to Strata yet (num.io.threads, controller.listener.names, ...; see
// ignoredSettings in config.go) are accepted with a warning.
//
// Only the first of log.dirs is used. listeners may name several
// listeners, each with its security protocol (PLAINTEXT, SSL,
// SASL_PLAINTEXT, SASL_SSL) from listener.security.protocol.map
// (security_config.go); a listener on 0.0.0.0 (or an empty host) needs an
// explicit advertised.listeners. Port 0 picks a free port and advertises it.
//
// # Cluster
//
// controller.quorum.voters (Kafka syntax, id@host:port,...) makes the
// brokers listed one metadata quorum; host:port is each broker's
// replication listener (cluster_config.go; replication.listener overrides
// where this broker binds it; strata.partition.heartbeat.timeout.ms sets
// the partition Raft groups' heartbeat timeout, i.e. how fast a dead
// partition leader is replaced). By default every node is both a voter
// and a broker; process.roles=broker makes a broker-only node (a Raft
// non-voter of the metadata quorum) and process.roles=controller a
// controller-only one (a voter with no Kafka listener, serve_controller.go).
// Each partition is a Raft group among its replicas (replication/doc.go).
// dev-cluster (devcluster.go) starts such a cluster of plain processes on
// loopback.
//
// # Lifecycle
//
// serve listens, opens the data directory (log.Manager), the broker
// (replication.Broker: metadata replay, every partition opened) and the
// Kafka server, and logs one "strata ready" line with the listener address.
// On SIGTERM or SIGINT it stops accepting, closes the server, then closes
// the broker (leaderships handed to live replicas, metadata log,
// partitions flushed and closed) and exits 0, all within
// strata.shutdown.timeout.ms (shutdown.go: each stage has a share of it;
// requests still in flight when the server's share ends are dropped with
// their connections). If the time runs out anyway the process logs the
// stage and a summary of its goroutines and exits with status 3. A second
// signal during shutdown kills the process. Exit status 1 is a runtime
// failure (storage, listener).
// SIGUSR1 logs the state of every raft group (replication.Broker.
// LogRaftState) and changes nothing.
//
// # Monitoring
//
// With metrics.listener set (monitoring.go), an HTTP listener comes up
// before the broker: /healthz answers at once, /readyz turns 200 when the
// "strata ready" line is logged and 503 again when shutdown starts, and
// /metrics serves one prometheus.Registry that serve passes to each
// package (protocol, log, replication, groupcoord, txncoord, retention
// register their own series, listed in their metrics.go; never the global
// default registry).
// /debug/pprof/ is there only with --pprof.
//
// main.go is thin: config.go, settings.go, properties.go and the
// *_config.go files parse the configuration, serve.go (and
// serve_controller.go for a controller-only node) wires the packages,
// dump.go is the segment dump tool, and each admin command has a file of
// its own (topic.go, group.go, ...). Nothing here is shared between
// goroutines except through the packages it wires.
package main
