package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	kafkaTools["kafka-acls"] = "org.apache.kafka.tools.AclCommand"
}

// TestKafkaACLTool: Kafka 4.4's kafka-acls (AclCommand), authenticated
// as a super user over SASL PLAIN with --command-config, adds, lists and
// removes ACLs on a broker with ACLs on; what it adds is enforced (alice
// may fetch the topic, then may not once removed).
func TestKafkaACLTool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and a JVM")
	}
	r := startToolRunner(t)
	ab := startACLBroker(t)
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw";
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", ab.sasl, "--command-config", props}
	ctx := aclCtx(t)
	if _, err := kadm.NewClient(ab.as(t, "admin")).CreateTopic(ctx, 1, 1, nil, "tool-orders"); err != nil {
		t.Fatal(err)
	}
	if err := ab.fetchErr(t, "alice", "tool-orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's fetch before any ACL: %v", err)
	}

	out := r.ok("kafka-acls", with(bs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "tool-orders")...)
	wantLines(t, "add", out, "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-orders, patternType=LITERAL)`",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)")
	r.ok("kafka-acls", with(bs, "--add", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1", "--operation", "Write",
		"--topic", "tool-", "--resource-pattern-type", "prefixed")...)
	r.ok("kafka-acls", with(bs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "tool-group")...)

	out = r.ok("kafka-acls", with(bs, "--list")...)
	wantLines(t, "list", out,
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-orders, patternType=LITERAL)`",
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-, patternType=PREFIXED)`",
		"(principal=User:bob, host=127.0.0.1, operation=WRITE, permissionType=DENY)",
		"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=tool-group, patternType=LITERAL)`")
	out = r.ok("kafka-acls", with(bs, "--list", "--topic", "tool-orders", "--resource-pattern-type", "match")...)
	wantLines(t, "list match", out, "operation=READ, permissionType=ALLOW", "operation=WRITE, permissionType=DENY")
	if strings.Contains(out, "tool-group") {
		t.Fatalf("list --topic tool-orders --resource-pattern-type match lists the group:\n%s", out)
	}
	if err := ab.fetchErr(t, "alice", "tool-orders"); err != nil {
		t.Fatalf("alice's fetch with the tool's ACL: %v", err)
	}

	r.ok("kafka-acls", with(bs, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "tool-orders")...)
	out = r.ok("kafka-acls", with(bs, "--list", "--topic", "tool-orders")...)
	if strings.Contains(out, "User:alice") {
		t.Fatalf("alice's ACLs still listed after --remove:\n%s", out)
	}
	if err := ab.fetchErr(t, "alice", "tool-orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's fetch after --remove: %v", err)
	}
	// A principal that is not a super user may not change ACLs.
	aliceProps := filepath.Join(t.TempDir(), "alice.properties")
	os.WriteFile(aliceProps, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-pw";
`), 0o600)
	r.fails("ClusterAuthorizationException", "kafka-acls", "--bootstrap-server", ab.sasl, "--command-config", aliceProps,
		"--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "tool-orders")
}
