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
// The randomized tests (the chaos tests, TestCrashMidProduce,
// TestCompactionSurvivesSIGKILL, the group churn, the transactional
// pipeline's worker kills, TestSecurityGarbageBodies) log their seed;
// STRATA_SEED=<seed> replays one (internal/testwait).
//
// TestClusterStableUnderBurst (stability_test.go) checks that three brokers
// stay stable under a burst and go quiet after it: 300 partitions at
// replication factor 3 are created at once (plus __consumer_offsets and
// __transaction_state) while transactional producers, read_committed
// consumer groups, a plain fetcher and topic churn run for 30 s, and a
// prober sends Metadata and CreateTopics to every broker every 500 ms.
// Every error clients and prober see must be retriable, no probe may go
// unanswered (or meet a lost controller) for more than 10 s in a row --
// one answered with a retriable error such as REQUEST_TIMED_OUT is logged,
// not failed --, every partition must have a leader within
// 10 s of the load's end, and for the next 30 s the brokers'
// strata_raft_elections_total (scraped from each broker's
// metrics.listener) and every partition's leader epoch must not change.
// It logs the elections, pre-votes and leader changes of the burst and of
// the quiet window, and takes 1.5 to 2.5 minutes (not in -short).
// STRATA_STABILITY_PARTITIONS sets the burst's partition count (default
// 300; 1000 is the long form), STRATA_STABILITY_LOAD the load's duration
// (a Go duration or seconds, default 30s); the test keeps both from the
// brokers it starts, which would read them as settings.
//
// The share-group dead-letter tests (share_dlq_test.go) take about 80 s
// together, most of it TestShareDLQFailover's three SIGKILLs of the share
// partition's leader while records are rejected;
// STRATA_SHARE_DLQ_LONG=1 makes it 20.
//
// Nothing here is imported by the broker; the package has only tests.
package e2e
