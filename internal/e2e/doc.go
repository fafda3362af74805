// Package e2e holds Strata's end-to-end tests: the real `strata` binary,
// started as a separate process on 127.0.0.1, driven by real Kafka clients
// (franz-go in Go; kcat, python3-confluent-kafka and python3-kafka through
// their command-line programs). These tests prove compatibility and crash
// safety from the outside: they kill the process with SIGKILL, restart it and
// check that every acknowledged record is still there.
//
// The cluster chaos tests (cluster_chaos_test.go, harness in
// chaos_cluster_test.go) run three `strata serve` processes whose
// replication traffic passes through loopback proxies the test controls:
// partition leaders are SIGKILLed and restarted on the same data directory
// and ports, brokers are cut off from their peers (both directions) and
// healed, while idempotent acks=all producers and consumers run. The
// short forms take about 45 s together; STRATA_CHAOS_LONG=1 runs 3 minutes
// of faults and a 270 s outage of one broker (STRATA_CHAOS_OUTAGE), and
// STRATA_CHAOS_BENCH=1 measures produce throughput at replication factor
// 1 and 3. STRATA_CHAOS_DIR keeps the brokers' data and logs;
// STRATA_CHAOS_HEARTBEAT sets TestClusterChaos's partition heartbeat
// timeout (default 500ms), for measuring failover at other values.
//
// Nothing here is imported by the broker; the package has only tests.
package e2e
