// Package bench is Strata's load tool: `strata bench produce|consume|e2e|
// workload|compare`. It speaks to brokers only over the Kafka protocol,
// with franz-go's kgo client, so it works against any Kafka-compatible
// broker; it imports nothing of Strata's but internal/kafkajars (which
// finds Apache Kafka's jars for the kafka brokers and --loadgen kafka).
//
// # Commands
//
//	produce   kafka-producer-perf-test style: --num-records, --record-size,
//	          --throughput (records/s, -1 = no limit), --acks, --idempotence,
//	          --compression, --linger, --batch-size, --partitions, --keys,
//	          --replication-factor;
//	          prints records/s, MB/s, avg and max latency, p50/p95/p99/p99.9
//	          (latency = Produce call to acknowledgement, as Kafka's tool),
//	          and a progress line every --reporting-interval (stderr).
//	consume   kafka-consumer-perf-test style: fills fresh topics (not
//	          measured), reads them back; records/s, MB/s, time to first record.
//	e2e       a fixed producer rate; each value's first 8 bytes carry the send
//	          time (ns), consumers in the same process take arrival minus send
//	          time: end-to-end latency percentiles (the record timestamp has
//	          only millisecond resolution, too coarse for a 1 ms target).
//	share     share groups (KIP-932, share.go): fills a fresh topic (not
//	          measured; --num-records, --record-size, --partitions), reads
//	          it with a classic consumer group of --consumers members, then
//	          with a share group of --consumers workers that accept every
//	          record (below); --broker-pid adds the broker's CPU per record.
//	workload  runs a workload file (below); --loadgen as compare's.
//	compare   runs workload files against several brokers it starts itself,
//	          interleaved, and reports medians and ratios (below).
//	idle      idle cost (idle.go): starts `strata dev-cluster --brokers N`,
//	          creates --topics topics of --partitions partitions in all at
//	          --replication-factor (default N), waits for their leaders and
//	          --settle, then reads each broker's CPU time from
//	          /proc/<pid>/stat over --duration with no traffic and its RSS
//	          (VmRSS, VmHWM); --cpuprofile-dir then saves a CPU profile of
//	          one broker (--profile-broker) from its /debug/pprof (the
//	          brokers get metrics.listener=127.0.0.1:0 and
//	          metrics.pprof.enable=true); --dir keeps data and broker logs.
//
// MB is MiB (2^20 bytes), as Kafka's perf tools print it; CPU per GiB
// likewise. Every run creates fresh topics (prefix-<time>-<n>) and deletes
// them afterwards, so no run reads another's records and a broker that
// keeps records in memory does not carry them into the next run.
//
// # Workload files
//
// A workload file is flat "key: value" lines ('#' comments), the subset of
// YAML the OpenMessaging Benchmark's workload files use, so a flat OMB file
// parses as it is:
//
//	name: e2e-5k                 # default: the file name
//	kind: e2e                    # produce | consume | e2e (OMB files: e2e)
//	topics: 1
//	partitionsPerTopic: 8
//	messageSize: 1024            # value bytes
//	numRecords: 500000           # total; with or instead of a duration
//	duration: 8s                 # or OMB's testDurationMinutes: 0.5
//	warmup: 2s                   # latencies of earlier records not counted
//	producerRate: 5000           # records/s over all producers, 0 = no limit
//	producersPerTopic: 1
//	subscriptionsPerTopic: 1     # "consumer groups": each reads every record
//	consumerPerSubscription: 1   # clients per subscription
//	acks: all                    # all (-1), 1, 0
//	idempotence: true            # default true with acks=all
//	compression: none            # none gzip snappy lz4 zstd
//	linger: 0s
//	batchSize: 1048576
//	keys: 0                      # distinct keys, 0 = no keys
//	consumerGroups: false        # true: each subscription is a consumer group
//	replicationFactor: 0         # of the topics; 0 = the run's (--replication-factor, compare's per broker)
//	keyDistributor, payloadFile, consumerBacklogSizeGB: accepted, ignored
//
// Consumer groups: by default a subscription is not a group: its consumers
// are given partitions (kgo ConsumePartitions), round-robin, and each
// subscription reads every record from offset 0. That works against a
// broker without consumer groups (Strata had none when this tool was
// written; the null broker has none) and measures what a group with a
// static assignment would see, without group coordination. consumerGroups:
// true (or --groups) makes each subscription a real consumer group (kgo
// ConsumerGroup, from the earliest offset, no offset commits), so joining
// and the assignment are part of the run (time to first record includes
// the join).
//
// # Share groups (kind: share)
//
// The share workload (`strata bench share`, or kind: share in a workload
// file: one topic, one subscription, consumerPerSubscription = N) puts a
// share group beside a classic consumer group in the same run, on the same
// records. After the fill it sets the share group's share.auto.offset.reset
// to earliest (IncrementalAlterConfigs on its GROUP resource: the default,
// latest, would read nothing of a filled topic); then a classic group of N
// kgo ConsumerGroup members reads every record from the earliest offset
// (no commits), and then N franz-go share consumers (kgo.ShareGroup) poll
// and Ack(AckAccept) every record until together they have accepted each
// offset once; each then waits for its acknowledgements to be answered
// (FlushAcks) and the clock stops. The classic group runs first so both
// read a topic equally cold. Records/s of each group count from its first
// record to its last: joining (a classic group waits out the broker's
// initial rebalance delay, 3 s by default) is the "first record ms"
// figure. A record delivered twice counts once (redelivered counts the
// extra deliveries); partitions whose acknowledgement the broker refused
// are ack errors. The figures: share records/s, classic records/s,
// share/classic, share MB/s, broker CPU µs per acknowledged record (the
// broker's CPU time over the share phase, including the join, divided by
// the records accepted) and per classic record, both groups' first record
// ms, and broker cores over both phases. Beside them, the settled
// figures: a classic group's first record comes once its join has given
// every member its partitions, while a share group's first member fetches
// at once from every partition and the others join beside it, each
// learning its own part at its next heartbeat (5 s apart by Kafka's
// default); the bench describes the share group every 100 ms and, once
// every member holds its part at the group's epoch, counts "settled
// records/s" from then to the last record (when that holds at least a
// quarter of them: runs of a few seconds have no settled figure) and
// "settled share/classic". --loadgen kafka-share is the
// other way to read a share group (Kafka's own share consumer tool on a
// consume workload); the share workload itself runs only with franz-go.
//
// # compare
//
// compare starts each broker as a child process, on a fresh temporary data
// dir and a free 127.0.0.1 port, so that its CPU time and peak RSS are its
// own: strata (`strata serve`, default durability), strata-fsync (the same
// with log.flush.interval.messages=1), kfake-disk and kfake-mem (franz-go's
// kfake, one broker, run by `strata bench kfake-server [--data-dir]`), null
// (`strata bench null-server`, NullBroker: answers without storing, the
// ceiling of the load generator), and strata-3 (`strata dev-cluster
// --brokers 3` on a free run of loopback ports: three `strata serve`
// processes, all voters of the metadata quorum; compare waits until the
// cluster lists three brokers, and sums the three processes' CPU time and
// peak RSS, found as dev-cluster's children in /proc), kafka and kafka-3
// (Apache Kafka 4.4.0, below). Topics are created
// at replication factor 3 on strata-3 and kafka-3 and 1 elsewhere, unless the
// workload sets replicationFactor or --replication-factor name=N says
// otherwise; the table shows a broker's factor when above 1. --external name=host:port adds a broker
// started elsewhere (no CPU or RSS figures). --strata-base BINARY adds
// strata-base and strata-base-fsync: the same two configurations served by
// another strata build, so a change is measured against the build before
// it in the same interleaved run (name strata-base first to get ratios
// new/base).
//
// For each workload, compare starts the brokers, then runs --rounds rounds;
// a round runs the workload once against every broker in the order given
// (A B C A B C ...), so that a noisy minute of a shared machine hits every
// broker alike. Around each run's measured phase it reads the broker's
// utime+stime from /proc/<pid>/stat, and at the end its VmHWM (peak RSS)
// from /proc/<pid>/status; CPU s/GiB = broker CPU seconds / GiB moved
// (produced plus consumed bytes), broker cores = CPU seconds / wall seconds.
// It prints each figure's median over the rounds and its ratio to the
// first broker's median as a Markdown table; with --out DIR it also writes
// compare.json (every sample), compare.md and compare.png (a chart drawn
// with image/png and a 5x7 bitmap font: MB/s by broker, e2e latency
// percentiles). --cpuprofile-dir runs the Strata brokers under
// `strata bench serve-profiled`, which writes a pprof CPU profile. The
// brokers' data dirs are temporary (their logs go to DIR/logs with --out);
// --work-dir DIR (new or empty) puts and keeps them in DIR (a cluster's broker logs are
// in DIR/w<workload>-strata-3/data/broker-<id>.log). The last column, start
// to ready, is from starting a broker's (first) process to the first
// Metadata answer that lists all its brokers: one sample per workload.
//
// # Apache Kafka as a broker (kafka.go)
//
// kafka is one Apache Kafka 4.4.0 node in KRaft combined mode
// (process.roles=broker,controller); kafka-3 is three such nodes, all
// voters of the metadata quorum (as strata-3's brokers are), with
// min.insync.replicas=2, its topics at replication factor 3. compare runs
// them from Kafka's jars (internal/kafkajars: STRATA_KAFKA_CLASSPATH, else
// kafka/fetch in the repository), each node a JVM started as
// kafka-server-start.sh starts it: main class kafka.Kafka, heap -Xms1g
// -Xmx1g (--kafka-heap), kafka-run-class.sh's G1 flags, a generated
// server.properties (listeners on a free run of loopback ports, data in
// the broker's temporary dir beside Strata's) and Kafka's defaults for
// everything else, except that a single node gives its internal topics
// (offsets, transactions, share state) replication factor 1. Each node's
// storage is formatted first (kafka.tools.StorageTool format, a random
// cluster id), which start to ready leaves out; a node is ready when it
// logs "Kafka Server started" and Metadata lists every node. CPU time and
// RSS are read from /proc as for the other brokers, summed over kafka-3's
// three JVMs; they stop on SIGTERM (controlled shutdown), SIGKILL after
// 40 s. Java and the jars missing: the broker is skipped with a note.
//
// # Load generators (--loadgen, loadgen.go)
//
// --loadgen franz (default) is this package's franz-go client. --loadgen
// kafka drives a workload with Kafka 4.4.0's own perf-test tools, each run
// as a JVM (-Xmx512M, as their scripts) by its main class:
// produce with kafka-producer-perf-test (org.apache.kafka.tools.
// ProducerPerformance: --num-records, --record-size, --throughput = the
// workload's rate or -1, and the workload's acks, enable.idempotence,
// compression.type, linger.ms and batch.size as --producer-props); consume
// fills the topic with franz-go (not measured) and reads it with
// kafka-consumer-perf-test (ConsumerPerformance, a classic consumer group
// from the earliest offset). --loadgen kafka-share consumes with
// kafka-share-consumer-perf-test (ShareConsumerPerformance, --threads =
// consumerPerSubscription) in a share group whose share.auto.offset.reset
// is set to earliest first (IncrementalAlterConfigs on the GROUP
// resource); it runs against Strata as against kafka (the share
// workload, kind: share, is franz-go's share consumer). The tools'
// output becomes the same Result: the producer's summary line
// (records/s, MB/s, avg, max and p50/p95/p99/p99.9 latency, send to
// acknowledgement in whole ms); the consumers' header and figures
// line, read by column name (data.consumed.in.MB and .nMsg over
// fetch.time.ms, which leaves the group join out; kafka-consumer-perf-test's
// rebalance.time.ms is the "first record ms" figure). The measured phase
// is the tool's whole process (its JVM start included: broker cores divide
// the broker's CPU by that wall time); client CPU is the tool's JVM's. The
// tools take one topic, one producer and one subscription; e2e has no
// Kafka tool at a fixed rate (kafka-e2e-latency sends one record at a
// time) and is refused, as is a workload without a record count or a rate
// and duration to derive one from.
//
// # Invariants and limits
//
// A histogram (Histogram) has fixed memory and 1.6% resolution; Record is
// lock-free (kgo calls promises from several goroutines). Workloads are
// bounded (topics, partitions, record size, clients: see Validate) and a
// run has a deadline (duration + 2 min + 1 s per 10 MiB of records asked
// for); an e2e consumer that cannot get every acknowledged record within
// 10 s of the last send fails the run instead of hanging. The null broker bounds frames (100 MiB), connections (1024),
// long polls (30 s) and the batches it keeps per partition (the latest 64
// or 4 MiB, and the largest), and closes a connection on a malformed
// request.
//
// # Goroutines and locks
//
// A run has one goroutine per producer and per consumer client, joined
// before Run returns; counters are atomics. NullBroker has one goroutine
// per connection and one mutex (mu) over its topic table; it never holds mu
// while copying record bytes or writing to a socket. compare has two
// goroutines per child process draining its output into a log file (one
// mutex around the file) and one waiting for it to exit. A strata-3
// child that does not stop within 40 s of SIGTERM is killed with its
// brokers; kafka-3's nodes are stopped side by side, each bounded alike.
// Children do not inherit STRATA_ variables (strata serve reads every one
// as a setting and refuses an unknown one, such as STRATA_KAFKA_CLASSPATH).
package bench
