package replication

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The metadata state machine's script tests: testdata/*.txt hold blocks of
//
//	<command>
//	----
//	<expected output: ok or the rejection, then the image>
//
// separated by blank lines; '#' lines are comments. Commands:
//
//	register <node> <host:port>
//	create <topic> <id byte> <replicas;replicas;...> [key=value ...]
//	delete <topic> <id byte>
//	delete-done <id byte>
//	grow <topic> <replicas;replicas;...>
//	configs <topic> [key=value ...]
//	pids <start> <count>
//
// If this test fails, run `go test ./replication -run TestMetadataScripts
// -rewrite` and inspect the diff. Only commit the changes if you understand
// what caused them.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

func TestMetadataScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(data), "\n")
			var out []string
			im := newImage()
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					out = append(out, line)
					continue
				}
				cmdLine := i + 1
				c, err := parseScriptCommand(line, im)
				if err != nil {
					t.Fatalf("%s:%d: %v", file, cmdLine, err)
				}
				if i+1 >= len(lines) || lines[i+1] != "----" {
					t.Fatalf("%s:%d: command not followed by ----", file, cmdLine)
				}
				i += 2
				var want []string
				for ; i < len(lines) && lines[i] != ""; i++ {
					want = append(want, lines[i])
				}
				next, aerr := im.Apply(c)
				im = next
				got := []string{"ok"}
				if aerr != nil {
					got[0] = "rejected: " + strings.TrimPrefix(aerr.Error(), errRejected.Error()+": ")
				}
				got = append(got, dumpImage(im)...)
				if !*rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, cmdLine, line, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				out = append(out, line, "----")
				out = append(out, got...)
				if i < len(lines) {
					out = append(out, "")
				}
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func parseScriptCommand(line string, im *image) (Command, error) {
	f := strings.Fields(line)
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
	kvs := func(fs []string) map[string]string {
		m := map[string]string{}
		for _, kv := range fs {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	need := func(n int) error {
		if len(f) < n {
			return fmt.Errorf("%q: want at least %d fields", line, n)
		}
		return nil
	}
	switch f[0] {
	case "register":
		if err := need(3); err != nil {
			return Command{}, err
		}
		host, port, _ := strings.Cut(f[2], ":")
		return Command{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: int32(atoi(f[1])), Host: host, Port: int32(atoi(port))}}, nil
	case "create":
		if err := need(4); err != nil {
			return Command{}, err
		}
		return Command{Type: CmdCreateTopic, Topic: f[1], TopicID: id(f[2]), Partitions: parts(f[3], 0), Configs: kvs(f[4:])}, nil
	case "delete":
		if err := need(3); err != nil {
			return Command{}, err
		}
		return Command{Type: CmdDeleteTopic, Topic: f[1], TopicID: id(f[2])}, nil
	case "delete-done":
		if err := need(2); err != nil {
			return Command{}, err
		}
		return Command{Type: CmdDeleteTopicDone, TopicID: id(f[1])}, nil
	case "grow":
		if err := need(3); err != nil {
			return Command{}, err
		}
		first := int32(0)
		if t, ok := im.topics[f[1]]; ok {
			first = int32(len(t.Partitions))
		}
		return Command{Type: CmdCreatePartitions, Topic: f[1], Partitions: parts(f[2], first)}, nil
	case "configs":
		if err := need(2); err != nil {
			return Command{}, err
		}
		return Command{Type: CmdSetTopicConfigs, Topic: f[1], Configs: kvs(f[2:])}, nil
	case "pids":
		if err := need(3); err != nil {
			return Command{}, err
		}
		return Command{Type: CmdAllocateProducerIDs, ProducerIDStart: atoi(f[1]), ProducerIDCount: atoi(f[2])}, nil
	}
	return Command{}, fmt.Errorf("unknown command %q", f[0])
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
