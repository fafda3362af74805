package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestSecurityThroughput compares produce and consume throughput over
// PLAINTEXT, SSL (mTLS) and SASL_SSL (SCRAM-SHA-512) on one broker in one
// run, with the broker's CPU time per GiB (from /proc). Long: set
// STRATA_BENCH_SECURITY=1 (STRATA_BENCH_SECURITY_MB sets the volume, 256).
func TestSecurityThroughput(t *testing.T) {
	if os.Getenv("STRATA_BENCH_SECURITY") == "" {
		t.Skip("set STRATA_BENCH_SECURITY=1 to run")
	}
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("STRATA_BENCH_SECURITY_MB")); err == nil && v > 0 {
		mb = v
	}
	sb := startSecureBroker(t)
	sb.addScramUser(t, scramUser, scramPass)
	tlsDial := func(clientCert bool) kgo.Opt {
		return kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: sb.tlsConfig(clientCert)}).DialContext)
	}
	paths := []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", []kgo.Opt{kgo.SeedBrokers(sb.addr)}},
		{"SSL", []kgo.Opt{kgo.SeedBrokers(sb.ssl), tlsDial(true)}},
		{"SASL_SSL", []kgo.Opt{kgo.SeedBrokers(sb.saslSSL), tlsDial(false), kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha512Mechanism())}},
	}
	value := make([]byte, 1024)
	rand.Read(value) // and no compression: the bytes cross the wire as they are
	n := mb * 1024
	type result struct{ prodMBs, consMBs, prodCPU, consCPU float64 }
	results := map[string]result{}
	for round := 0; round < 2; round++ { // two rounds, interleaved, best of each
		for _, p := range paths {
			topic := fmt.Sprintf("bench-%s-%d", strings.ToLower(p.name), round)
			cl, err := kgo.NewClient(append(p.opts, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			cpu0 := procCPU(t, sb.pid())
			start := time.Now()
			errc := make(chan error, 1)
			for i := 0; i < n; i++ {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			prod := time.Since(start)
			cpu1 := procCPU(t, sb.pid())
			cl.AddConsumeTopics(topic)
			got := 0
			start = time.Now()
			for got < n {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatal(err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
				got += fs.NumRecords()
			}
			cons := time.Since(start)
			cpu2 := procCPU(t, sb.pid())
			cancel()
			cl.Close()
			gib := float64(n) * 1024 / (1 << 30)
			r := result{
				prodMBs: float64(mb) / prod.Seconds(), consMBs: float64(mb) / cons.Seconds(),
				prodCPU: (cpu1 - cpu0) / gib, consCPU: (cpu2 - cpu1) / gib,
			}
			t.Logf("round %d %-9s produce %7.1f MiB/s (broker CPU %5.2f s/GiB)  consume %7.1f MiB/s (broker CPU %5.2f s/GiB)",
				round, p.name, r.prodMBs, r.prodCPU, r.consMBs, r.consCPU)
			if old, ok := results[p.name]; !ok || r.prodMBs > old.prodMBs {
				old.prodMBs, old.prodCPU = r.prodMBs, r.prodCPU
				results[p.name] = old
			}
			if old := results[p.name]; r.consMBs > old.consMBs || old.consMBs == 0 {
				old.consMBs, old.consCPU = r.consMBs, r.consCPU
				results[p.name] = old
			}
		}
	}
	base := results["PLAINTEXT"]
	for _, p := range paths {
		r := results[p.name]
		t.Logf("best %-9s produce %7.1f MiB/s (%.2fx PLAINTEXT, %.2f CPU-s/GiB)  consume %7.1f MiB/s (%.2fx, %.2f CPU-s/GiB)",
			p.name, r.prodMBs, r.prodMBs/base.prodMBs, r.prodCPU, r.consMBs, r.consMBs/base.consMBs, r.consCPU)
	}
}

// procCPU is a process's user+system CPU time in seconds (/proc/PID/stat).
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100 // USER_HZ
}
