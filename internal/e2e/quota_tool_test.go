package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestKafkaConfigsQuotas: Kafka 4.4's kafka-configs (ConfigCommand) sets,
// describes and deletes client quotas on users, client IDs, their
// defaults, both together and IP addresses (AlterClientQuotas, DescribeClientQuotas);
// the quotas are in the replicated metadata and survive a restart.
func TestKafkaConfigsQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and a JVM")
	}
	r := startToolRunner(t)
	b := startBroker(t, "")
	bs := []string{"--bootstrap-server", b.addr}

	out := r.ok("kafka-configs", with(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")...)
	wantLines(t, "alter user", out, "Completed updating config for user alice.")
	out = r.ok("kafka-configs", with(bs, "--alter", "--entity-type", "clients", "--entity-default",
		"--add-config", "request_percentage=50")...)
	wantLines(t, "alter client default", out, "Completed updating default config for clients in the cluster.")
	r.ok("kafka-configs", with(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--entity-type", "clients", "--entity-name", "app", "--add-config", "controller_mutation_rate=10")...)
	r.ok("kafka-configs", with(bs, "--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=100")...)
	out = r.ok("kafka-configs", with(bs, "--describe", "--entity-type", "ips", "--entity-name", "10.1.2.3")...)
	wantLines(t, "describe ip", out, "connection_creation_rate=100")
	r.fails("InvalidRequestException", "kafka-configs", with(bs, "--alter", "--entity-type", "users", "--entity-name", "bob",
		"--add-config", "producer_byte_rate=1.5")...)

	describe := func() {
		t.Helper()
		out := r.ok("kafka-configs", with(bs, "--describe", "--entity-type", "users", "--entity-name", "alice")...)
		wantLines(t, "describe user", out, "Quota configs for user-principal 'alice' are", "consumer_byte_rate=2097152.0", "producer_byte_rate=1048576.0")
		out = r.ok("kafka-configs", with(bs, "--describe", "--entity-type", "clients", "--entity-default")...)
		wantLines(t, "describe client default", out, "Quota configs for the default client-id are request_percentage=50.0")
		out = r.ok("kafka-configs", with(bs, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")...)
		wantLines(t, "describe user and client", out, "Quota configs for user-principal 'alice', client-id 'app' are controller_mutation_rate=10.0")
	}
	describe()

	// The quotas are replicated metadata: a restart keeps them.
	b.restart()
	describe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := kadm.NewClient(b.client()).DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(all) != 4 {
		t.Fatalf("DescribeClientQuotas after the restart: %v %v", all, err)
	}

	r.ok("kafka-configs", with(bs, "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "producer_byte_rate")...)
	out = r.ok("kafka-configs", with(bs, "--describe", "--entity-type", "users", "--entity-name", "alice")...)
	if strings.Contains(out, "producer_byte_rate") || !strings.Contains(out, "consumer_byte_rate=2097152.0") {
		t.Fatalf("after --delete-config producer_byte_rate:\n%s", out)
	}
}
