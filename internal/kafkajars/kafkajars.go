// Package kafkajars finds Apache Kafka 4.4.0's jars (kafka/pom.xml) for the
// tests and benchmarks that run Kafka's Java client, its command-line tools
// or its broker beside Strata, and compiles the small Java programs those
// tests carry.
//
// The classpath comes from STRATA_KAFKA_CLASSPATH when set (.ci/run sets
// it), else from running kafka/fetch in the repository this process runs
// in (it fetches the jars from Maven Central once, into kafka/.cache/lib,
// and prints the classpath). Fetches from concurrent test binaries are
// serialized by a lock file beside the cache.
package kafkajars

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Env is the environment variable that names the classpath directly.
const Env = "STRATA_KAFKA_CLASSPATH"

var (
	once    sync.Once
	cp      string
	cpErr   error
	rootErr = errors.New("kafkajars: kafka/fetch not found above the working directory; set " + Env)
)

// Classpath returns the ':'-joined classpath of Kafka's jars, fetching them
// on first use when needed. The result is computed once per process.
func Classpath() (string, error) {
	once.Do(func() { cp, cpErr = classpath() })
	return cp, cpErr
}

func classpath() (string, error) {
	if v := strings.TrimSpace(os.Getenv(Env)); v != "" {
		return v, nil
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("kafkajars: java not installed: %w", err)
	}
	fetch, err := findFetch()
	if err != nil {
		return "", err
	}
	cache := filepath.Join(filepath.Dir(fetch), ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	var out, stderr bytes.Buffer
	cmd := exec.Command(fetch)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkajars: %s: %v: %s", fetch, err, lastLines(stderr.String(), 20))
	}
	v := strings.TrimSpace(out.String())
	if v == "" {
		return "", fmt.Errorf("kafkajars: %s printed no classpath", fetch)
	}
	return v, nil
}

// findFetch looks for kafka/fetch in the working directory and its parents
// (go test runs in the package's folder, inside the repository).
func findFetch() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "kafka", "fetch")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", rootErr
		}
		dir = parent
	}
}

// Compile compiles the Java sources in srcDir (every *.java file) against
// the classpath into outDir and returns the classpath to run them with
// (outDir first).
func Compile(srcDir, outDir string) (string, error) {
	base, err := Classpath()
	if err != nil {
		return "", err
	}
	srcs, err := filepath.Glob(filepath.Join(srcDir, "*.java"))
	if err != nil {
		return "", err
	}
	if len(srcs) == 0 {
		return "", fmt.Errorf("kafkajars: no .java files in %s", srcDir)
	}
	// javac's own JVM with the client compiler only and the serial
	// collector: a test's few files compile in a third of the time on a
	// loaded 2-core machine (11 s instead of 36 s at load average 22).
	args := append([]string{"-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC",
		"-nowarn", "-encoding", "UTF-8", "-d", outDir, "-cp", base}, srcs...)
	cmd := exec.Command("javac", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkajars: javac: %v\n%s", err, out.String())
	}
	return outDir + string(os.PathListSeparator) + base, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
