package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// run executes a command with a timeout and returns its combined output,
// failing the test when it exits non-zero.
func run(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKcat produces, consumes and lists metadata with kcat (librdkafka).
func TestKcat(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := startBroker(t, "")
	// Auto-creation through Metadata: kcat's producer asks for the topic.
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := 0; i < 200; i++ {
			fmt.Fprintf(&in, "%s:line %d of %s\n", codec, i, codec)
		}
		run(t, time.Minute, in.String(), kcat, "-b", b.addr, "-P", "-t", "kcat", "-p", "0", "-K", ":", "-z", codec, "-X", "enable.idempotence=true")
	}
	out := run(t, time.Minute, "", kcat, "-b", b.addr, "-C", "-q", "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-f", "%o %k %s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1000 {
		t.Fatalf("kcat consumed %d lines, want 1000:\n%s", len(lines), out)
	}
	for i, l := range lines {
		codec := []string{"none", "gzip", "snappy", "lz4", "zstd"}[i/200]
		want := fmt.Sprintf("%d %s line %d of %s", i, codec, i%200, codec)
		if l != want {
			t.Fatalf("line %d: got %q want %q", i, l, want)
		}
	}
	md := run(t, time.Minute, "", kcat, "-b", b.addr, "-L", "-t", "kcat")
	if !strings.Contains(md, `topic "kcat" with 1 partitions`) || !strings.Contains(md, "leader 1") {
		t.Fatalf("kcat -L output unexpected:\n%s", md)
	}
	// Offsets by time and the end of the log.
	out = run(t, time.Minute, "", kcat, "-b", b.addr, "-Q", "-t", "kcat:0:-1")
	if !strings.Contains(out, "kcat [0] offset 1000") {
		t.Fatalf("kcat -Q latest: %s", out)
	}
}

// TestPythonConfluentKafka drives the broker with python3-confluent-kafka.
func TestPythonConfluentKafka(t *testing.T) {
	forEachPython(t, "confluent_kafka", func(t *testing.T, py string) {
		b := startBroker(t, "")
		out := run(t, 2*time.Minute, "", py, "testdata/confluent_client.py", b.addr, "py-confluent")
		if !strings.Contains(out, "ok 3000") {
			t.Fatalf("unexpected output:\n%s", out)
		}
	})
}

// TestPythonKafka drives the broker with python3-kafka (kafka-python 2.0).
func TestPythonKafka(t *testing.T) {
	forEachPython(t, "kafka", func(t *testing.T, py string) {
		b := startBroker(t, "")
		out := run(t, 2*time.Minute, "", py, "testdata/kafka_python_client.py", b.addr, "py-kafka")
		if !strings.Contains(out, "ok 2000") {
			t.Fatalf("unexpected output:\n%s", out)
		}
	})
}

// pythonWith returns a Python interpreter that can import module. Debian's
// python3-confluent-kafka and python3-kafka install for /usr/bin/python3,
// which may not be the python3 first on PATH (pyenv), so try it first.
func pythonWith(t *testing.T, module string) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import "+module).Run() == nil {
			return py
		}
	}
	return needTool(t, "python3 module "+module)
}

// pythonVenvEnv names the interpreter of the virtual environment .ci/run
// makes from testdata/requirements.txt: confluent-kafka and kafka-python
// from PyPI at pinned versions.
const pythonVenvEnv = "STRATA_PYTHON_VENV"

// forEachPython runs f as two subtests: "debian" with Debian's packaged
// module (python3-confluent-kafka, python3-kafka; pythonWith) and "pypi"
// with the pinned one from PyPI in the virtual environment named by
// STRATA_PYTHON_VENV. Each skips where its Python is missing, except
// under CI (CI=true), where .ci/run installs both and a missing one fails.
func forEachPython(t *testing.T, module string, f func(t *testing.T, py string)) {
	t.Run("debian", func(t *testing.T) { f(t, pythonWith(t, module)) })
	t.Run("pypi", func(t *testing.T) {
		py := os.Getenv(pythonVenvEnv)
		if py == "" || exec.Command(py, "-c", "import "+module).Run() != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no Python with %s from PyPI (%s=%q; .ci/run installs testdata/requirements.txt into a venv)", module, pythonVenvEnv, py)
			}
			t.Skipf("no Python with %s from PyPI: set %s to the python of a venv with testdata/requirements.txt installed", module, pythonVenvEnv)
		}
		f(t, py)
	})
}

// TestPythonConfluentKafkaTransactions: librdkafka's transactional
// producer commits, aborts and is fenced (testdata/confluent_txn.py).
func TestPythonConfluentKafkaTransactions(t *testing.T) {
	forEachPython(t, "confluent_kafka", func(t *testing.T, py string) {
		b := startBroker(t, "", txnBrokerArgs...)
		out := run(t, 2*time.Minute, "", py, "testdata/confluent_txn.py", b.addr, "py-txn")
		if !strings.Contains(out, "ok") {
			t.Fatalf("unexpected output:\n%s", out)
		}
	})
}

// TestPythonConfluentBrokerConfigs: librdkafka's AdminClient sets a
// broker's dynamic configs and describes them with their sources and
// synonyms; a static setting is refused.
func TestPythonConfluentBrokerConfigs(t *testing.T) {
	forEachPython(t, "confluent_kafka", func(t *testing.T, py string) {
		b := startBroker(t, "")
		out := run(t, time.Minute, "", py, "testdata/confluent_broker_configs.py", b.addr)
		for _, want := range []string{
			"log.retention.ms=300000 source=2 read_only=False",
			"log.segment.bytes=4096 source=2 read_only=False",
			"num.partitions=1 source=5 read_only=True",
			"synonyms: log.retention.ms=300000",
			"num.partitions: refused INVALID_REQUEST",
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		}
	})
}
