package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// strataBin is the path of the binary built once by TestMain.
var strataBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", strataBin, "github.com/strata-io/strata/cmd/strata")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building strata:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// broker is one strata process under test.
type broker struct {
	t       testing.TB
	dataDir string
	addr    string
	args    []string
	// opts are what a client needs to reach addr (TLS, SASL) when it is
	// not a PLAINTEXT listener: used by the readiness check and client.
	opts []kgo.Opt

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *bytes.Buffer // protected by mu; stdout+stderr of every run
	done chan struct{} // closed when the current process has exited
}

// freeAddr returns a 127.0.0.1 address nothing listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBroker starts strata serve on a fresh port with its data in dataDir
// (a new temp dir when empty) and waits until it answers Kafka requests.
func startBroker(t testing.TB, dataDir string, extra ...string) *broker {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	b := &broker{t: t, dataDir: dataDir, addr: freeAddr(t), logs: new(bytes.Buffer), args: extra}
	b.start()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			b.mu.Lock()
			out := b.logs.String()
			b.mu.Unlock()
			if len(out) > 20000 {
				out = "..." + out[len(out)-20000:]
			}
			t.Logf("broker log:\n%s", out)
		}
	})
	return b
}

func (b *broker) start() {
	b.t.Helper()
	args := append([]string{"serve",
		"--set", "listeners=PLAINTEXT://" + b.addr,
		"--set", "log.dirs=" + b.dataDir,
	}, b.args...)
	cmd := exec.Command(strataBin, args...)
	cmd.Env = brokerEnv()
	b.mu.Lock()
	w := &lockedWriter{mu: &b.mu, buf: b.logs}
	b.mu.Unlock()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	b.mu.Lock()
	b.cmd, b.done = cmd, done
	b.mu.Unlock()
	b.waitReady(done)
}

// waitReady polls until the broker answers ApiVersions, or fails the test
// after 20 seconds or when the process exits.
func (b *broker) waitReady(done chan struct{}) {
	b.t.Helper()
	testwait.For(b.t, 20*time.Second, func() bool {
		select {
		case <-done:
			b.t.Fatalf("strata exited during start-up")
		default:
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, b.opts...)...)
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return cl.Ping(ctx) == nil
	}, "strata did not become ready at %s", b.addr)
}

// stop sends SIGTERM and waits for a clean exit (exit code 0).
func (b *broker) stop() {
	b.t.Helper()
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		b.t.Fatalf("strata did not stop within 30s of SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		b.t.Fatalf("strata exited with code %d after SIGTERM", code)
	}
	b.mu.Lock()
	b.cmd = nil
	b.mu.Unlock()
}

// kill sends SIGKILL: the process gets no chance to flush anything.
func (b *broker) kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// restart stops (SIGTERM) and starts the broker again on the same address.
func (b *broker) restart() {
	b.t.Helper()
	b.stop()
	b.start()
}

func (b *broker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, b.opts...), opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

// brokerEnv is this process's environment without its STRATA_* variables:
// serve reads every STRATA_<NAME> variable as a setting and refuses an
// unknown one, and those around a test are the tests' own (STRATA_CHAOS_*,
// STRATA_KAFKA_CLASSPATH, STRATA_PYTHON_VENV, ...). Brokers under test get
// their settings from flags.
func brokerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 8<<20 { // bound the captured log
		w.buf.Reset()
		w.buf.WriteString("[log truncated]\n")
	}
	return w.buf.Write(p)
}

// needTool returns the path of an external client, skipping the test when it
// is missing -- except under CI (CI=true), where .ci/run installs it and a
// missing tool is a failure.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed (CI must install it: see .ci/run)", name)
		}
		t.Skipf("%s not installed; apt-get install it to run this test", name)
	}
	return p
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
