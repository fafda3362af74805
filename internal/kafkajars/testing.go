package kafkajars

import (
	"os"
	"testing"
)

// Need returns the classpath for a test, skipping the test when Java or
// the jars are missing -- except under CI (CI=true), where .ci/run fetches
// them and their absence is a failure.
func Need(t testing.TB) string {
	t.Helper()
	cp, err := Classpath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Apache Kafka's jars are missing (CI must fetch them: see .ci/run): %v", err)
		}
		t.Skipf("Apache Kafka's jars are not available (needs java and mvn; run kafka/fetch): %v", err)
	}
	return cp
}

// NeedCompiled compiles the Java sources in srcDir into a temporary folder
// of t's and returns the classpath to run them with; it skips or fails as
// Need does.
func NeedCompiled(t testing.TB, srcDir string) string {
	t.Helper()
	Need(t)
	cp, err := Compile(srcDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
