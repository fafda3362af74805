package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnCLI: strata txn list and describe show an open transaction.
func TestTxnCLI(t *testing.T) {
	b := startBroker(t, "", txnBrokerArgs...)
	createTopic(t, b, "cli", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(kgo.TransactionalID("cli-txn"), kgo.DefaultProduceTopic("cli"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, strataBin, "txn", "list", "--bootstrap-server", b.addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cli-txn") || !strings.Contains(string(out), "Ongoing") {
		t.Fatalf("txn list: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, strataBin, "txn", "describe", "cli-txn", "--bootstrap-server", b.addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "state:            Ongoing") || !strings.Contains(string(out), "cli") {
		t.Fatalf("txn describe: %v\n%s", err, out)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	out, err = exec.CommandContext(ctx, strataBin, "txn", "describe", "cli-txn", "--bootstrap-server", b.addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CompleteCommit") {
		t.Fatalf("txn describe after commit: %v\n%s", err, out)
	}
	out, _ = exec.CommandContext(ctx, strataBin, "txn", "describe", "nope", "--bootstrap-server", b.addr).CombinedOutput()
	if !strings.Contains(string(out), "TRANSACTIONAL_ID_NOT_FOUND") {
		t.Fatalf("txn describe of an unknown ID: %s", out)
	}
}

// BenchmarkTxnSmall: transactions per second, each of 10 records of 100
// bytes to one partition, one producer, commit awaited (the answer waits
// for the markers).
//
//	go test -run XXX -bench BenchmarkTxn -benchtime 2s ./internal/e2e/
func BenchmarkTxnSmall(b *testing.B) {
	br := startBroker(b, "", txnBrokerArgs...)
	createTopicTB(b, br, "bench-small", 1)
	ctx := context.Background()
	cl := br.client(kgo.TransactionalID("bench-small"), kgo.DefaultProduceTopic("bench-small"), kgo.ProducerLinger(0))
	val := make([]byte, 100)
	// Warm up: InitProducerId, coordinator load.
	txnOnce(b, ctx, cl, val, 1)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		txnOnce(b, ctx, cl, val, 10)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "txn/s")
}

func txnOnce(b *testing.B, ctx context.Context, cl *kgo.Client, val []byte, n int) {
	if err := cl.BeginTransaction(); err != nil {
		b.Fatal(err)
	}
	for j := 0; j < n; j++ {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTxnThroughput: 1 KiB records to 4 partitions from one
// producer, idempotent vs transactional (one transaction per 1,000
// records) under transaction.version 2 (the default) and 1, on brokers
// started by the same run; compare the sub-benchmarks' MB/s for the ratio.
//
//	go test -run XXX -bench BenchmarkTxnThroughput -benchtime 2s ./internal/e2e/
func BenchmarkTxnThroughput(b *testing.B) {
	tv2 := startBroker(b, "", txnBrokerArgs...)
	tv1 := startBroker(b, "", append([]string{"--set", "transaction.version=1"}, txnBrokerArgs...)...)
	val := make([]byte, 1024)
	for _, mode := range []string{"idempotent", "transactional-tv2", "transactional-tv1"} {
		b.Run(mode, func(b *testing.B) {
			br := tv2
			if mode == "transactional-tv1" {
				br = tv1
			}
			txn := mode != "idempotent"
			topic := fmt.Sprintf("bench-%s-%d", mode, b.N)
			createTopicTB(b, br, topic, 4)
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}
			if txn {
				opts = append(opts, kgo.TransactionalID(topic))
			}
			cl := br.client(opts...)
			ctx := context.Background()
			b.SetBytes(int64(len(val)))
			b.ResetTimer()
			const perTxn = 1000
			for done := 0; done < b.N; {
				n := min(perTxn, b.N-done)
				if txn {
					if err := cl.BeginTransaction(); err != nil {
						b.Fatal(err)
					}
				}
				for j := 0; j < n; j++ {
					cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				err := cl.Flush(ctx)
				if err == nil && txn {
					err = cl.EndTransaction(ctx, kgo.TryCommit)
				}
				if err != nil {
					b.Fatal(fmt.Errorf("%s: %w", mode, err))
				}
				done += n
			}
		})
	}
}

func createTopicTB(t testing.TB, b *broker, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := kadm.NewClient(b.client()).CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, r.Err)
	}
}
