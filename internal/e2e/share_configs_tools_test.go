package e2e

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/kafkajars"
)

// configTool runs one of Kafka 4.4.0's command-line tools (main class)
// against b and returns its combined output and exit code.
func configTool(t *testing.T, cp, main string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, main}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s %v: %v\n%s", main, args, err, out)
	return "", -1
}

// TestShareConfigsWithKafkaTools: Kafka's own kafka-features and
// kafka-configs (Kafka 4.4.0's FeatureCommand and ConfigCommand, from
// kafka/.cache/lib) disable share groups and set a share group's configs
// on a Strata broker, are refused with Kafka's messages where Kafka
// refuses, and find both again after the broker restarts. Six JVM runs:
// about 30-60 s on a loaded 2-core machine.
func TestShareConfigsWithKafkaTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Kafka's tools in six JVMs")
	}
	cp := kafkajars.Need(t)
	b := startBroker(t, "", "--set", "group.share.delivery.count.limit=4")
	bs := []string{"--bootstrap-server", b.addr}
	const (
		features = "org.apache.kafka.tools.FeatureCommand"
		configs  = "org.apache.kafka.tools.ConfigCommand"
	)
	if out, code := configTool(t, cp, features, append(bs, "disable", "--feature", "share.version")...); code != 0 || !strings.Contains(out, "share.version was disabled.") {
		t.Fatalf("kafka-features disable: exit %d\n%s", code, out)
	}
	if out, code := configTool(t, cp, configs, append(bs, "--alter", "--entity-type", "groups", "--entity-name", "jobs",
		"--add-config", "share.record.lock.duration.ms=20000,share.auto.offset.reset=earliest,errors.deadletterqueue.topic.name=dlq.jobs")...); code != 0 || !strings.Contains(out, "Completed updating config for group jobs.") {
		t.Fatalf("kafka-configs alter: exit %d\n%s", code, out)
	}
	if out, code := configTool(t, cp, configs, append(bs, "--alter", "--entity-type", "groups", "--entity-name", "jobs",
		"--add-config", "share.record.lock.duration.ms=1000")...); code == 0 ||
		!strings.Contains(out, "InvalidConfigurationException: share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.") {
		t.Fatalf("kafka-configs alter below the minimum: exit %d\n%s", code, out)
	}

	b.restart()
	out, code := configTool(t, cp, features, append(bs, "describe")...)
	if code != 0 ||
		!regexp.MustCompile(`Feature: share.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 0\s+Epoch: \d+`).MatchString(out) ||
		!regexp.MustCompile(`Feature: transaction.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s+Epoch: \d+`).MatchString(out) {
		t.Fatalf("kafka-features describe after restart: exit %d\n%s", code, out)
	}
	// Without a name, kafka-configs lists the groups that have configs
	// (ListConfigResources) and describes each.
	out, code = configTool(t, cp, configs, append(bs, "--describe", "--entity-type", "groups")...)
	if code != 0 || !strings.Contains(out, "Dynamic configs for group jobs are:") ||
		!strings.Contains(out, "share.record.lock.duration.ms=20000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.record.lock.duration.ms=20000, DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}") ||
		!strings.Contains(out, "share.auto.offset.reset=earliest") || !strings.Contains(out, "errors.deadletterqueue.topic.name=dlq.jobs") {
		t.Fatalf("kafka-configs describe after restart: exit %d\n%s", code, out)
	}
	if out, code := configTool(t, cp, features, append(bs, "upgrade", "--feature", "share.version=1")...); code != 0 || !strings.Contains(out, "share.version was upgraded to 1.") {
		t.Fatalf("kafka-features upgrade: exit %d\n%s", code, out)
	}
	// share.version 2 (KIP-1191's dead-letter topics), Kafka 4.4's latest.
	if out, code := configTool(t, cp, features, append(bs, "upgrade", "--feature", "share.version=2")...); code != 0 || !strings.Contains(out, "share.version was upgraded to 2.") {
		t.Fatalf("kafka-features upgrade to 2: exit %d\n%s", code, out)
	}
}
