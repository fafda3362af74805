package replication

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/script"
)

// The metadata state machine's script tests (the format: internal/script).
// Each command applies one Command to the image and prints "ok" or the
// rejection, then the whole image. Commands:
//
//	register <node> <host:port>                              register 1 localhost:9092
//	create <topic> <id byte> <replicas;replicas;...> [k=v]   create orders 1 1,2;2,3 retention.ms=10
//	delete <topic> <id byte>                                 delete orders 1
//	delete-done <id byte>                                    delete-done 1
//	grow <topic> <replicas;replicas;...>                     grow orders 3;1
//	configs <topic> [key=value ...]                          configs orders cleanup.policy=compact
//	pids <start> <count>                                     pids 1000 1000
//
// If this test fails, run `go test ./replication -run TestMetadataScripts
// -rewrite` and inspect the diff. Only commit the changes if you understand
// what caused them.
func TestMetadataScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(*testing.T) script.Commands {
		im := newImage()
		apply := func(cmd Command) string {
			next, aerr := im.Apply(cmd)
			im = next
			got := []string{"ok"}
			if aerr != nil {
				got[0] = "rejected: " + strings.TrimPrefix(aerr.Error(), errRejected.Error()+": ")
			}
			return strings.Join(append(got, dumpImage(im)...), "\n")
		}
		atoi := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
		id := func(s string) [16]byte { return [16]byte{byte(atoi(s))} }
		parts := func(s string, first int32) []Assignment {
			var as []Assignment
			for i, p := range strings.Split(s, ";") {
				var reps []int32
				for _, r := range strings.Split(p, ",") {
					reps = append(reps, int32(atoi(r)))
				}
				as = append(as, Assignment{Partition: first + int32(i), Replicas: reps})
			}
			return as
		}
		// need returns the command's fields after its name, at least n of them.
		need := func(c *script.Case, n int) []string {
			if len(c.Fields) < n {
				c.Fatalf("want at least %d fields after the command", n)
			}
			return c.Fields
		}
		return script.Commands{
			"register": func(c *script.Case) string {
				f := need(c, 2)
				host, port, _ := strings.Cut(f[1], ":")
				return apply(Command{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: int32(atoi(f[0])), Host: host, Port: int32(atoi(port))}})
			},
			"create": func(c *script.Case) string {
				f := need(c, 3)
				return apply(Command{Type: CmdCreateTopic, Topic: f[0], TopicID: id(f[1]), Partitions: parts(f[2], 0), Configs: kvs(f[3:])})
			},
			"delete": func(c *script.Case) string {
				f := need(c, 2)
				return apply(Command{Type: CmdDeleteTopic, Topic: f[0], TopicID: id(f[1])})
			},
			"delete-done": func(c *script.Case) string {
				return apply(Command{Type: CmdDeleteTopicDone, TopicID: id(need(c, 1)[0])})
			},
			"grow": func(c *script.Case) string {
				f := need(c, 2)
				first := int32(0)
				if t, ok := im.topics[f[0]]; ok {
					first = int32(len(t.Partitions))
				}
				return apply(Command{Type: CmdCreatePartitions, Topic: f[0], Partitions: parts(f[1], first)})
			},
			"configs": func(c *script.Case) string {
				f := need(c, 1)
				return apply(Command{Type: CmdSetTopicConfigs, Topic: f[0], Configs: kvs(f[1:])})
			},
			"pids": func(c *script.Case) string {
				f := need(c, 2)
				return apply(Command{Type: CmdAllocateProducerIDs, ProducerIDStart: atoi(f[0]), ProducerIDCount: atoi(f[1])})
			},
		}
	})
}

func kvs(fs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range fs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// dumpImage prints an image deterministically.
func dumpImage(im *image) []string {
	var out []string
	var nodes []int
	for n := range im.brokers {
		nodes = append(nodes, int(n))
	}
	sort.Ints(nodes)
	for _, n := range nodes {
		b := im.brokers[int32(n)]
		out = append(out, fmt.Sprintf("  broker %d %s:%d", b.NodeID, b.Host, b.Port))
	}
	for _, name := range im.names {
		t := im.topics[name]
		var ps []string
		for _, p := range t.Partitions {
			ps = append(ps, fmt.Sprintf("%d:%v", p.Partition, p.Replicas))
		}
		var cs []string
		for k, v := range t.Configs {
			cs = append(cs, k+"="+v)
		}
		sort.Strings(cs)
		line := fmt.Sprintf("  topic %s id=%d internal=%t partitions=%s", name, t.ID[0], t.Internal, strings.Join(ps, " "))
		if len(cs) > 0 {
			line += " configs=" + strings.Join(cs, ",")
		}
		out = append(out, line)
	}
	var pend []string
	for id, p := range im.pending {
		pend = append(pend, fmt.Sprintf("  pending-delete %s id=%d partitions=%d", p.Name, id[0], p.Partitions))
	}
	sort.Strings(pend)
	out = append(out, pend...)
	out = append(out, fmt.Sprintf("  next-producer-id %d partitions %d applied %d", im.nextProducerID, im.partitions, im.applied))
	return out
}
