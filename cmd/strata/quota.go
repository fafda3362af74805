package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// strata quota: client quotas (AlterClientQuotas, DescribeClientQuotas),
// the entities and keys of kafka-configs.sh --entity-type users/clients/ips.

const quotaUsage = `Usage:
  strata quota set    ENTITY KEY=VALUE...  set quotas of an entity
  strata quota remove ENTITY KEY...        remove quotas of an entity
  strata quota list   [ENTITY] [--strict]  list the quotas (of entities matching ENTITY)

ENTITY is one or two of:
  --user NAME       --user-default        a user (the principal's name: alice for User:alice;
                                          ANONYMOUS on a PLAINTEXT listener), or every user
  --client-id NAME  --client-id-default   a client ID, or every client ID
  --ip ADDR         --ip-default          an IP address (connection_creation_rate only)

Keys (Kafka's): producer_byte_rate and consumer_byte_rate (bytes per second),
request_percentage (of one request thread, 100 = one), controller_mutation_rate
(partitions created or deleted per second), connection_creation_rate (ip).
The quota of a request is the most specific one set: user+client-id,
user+default client-id, user, default user+client-id, default user+default
client-id, default user, client-id, default client-id. Examples:

  strata quota set --user alice producer_byte_rate=1048576 consumer_byte_rate=2097152
  strata quota set --client-id-default request_percentage=50
  strata quota list --user alice
  strata quota remove --user alice producer_byte_rate

The admin commands connect without TLS or SASL: point them at a PLAINTEXT
listener bound to loopback or a private network.
`

func quotaCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, quotaUsage)
		return exitOK
	}
	sub := args[0]
	fs := flag.NewFlagSet("quota "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a adminFlags
	a.register(fs, environ)
	user := fs.String("user", "", "a user")
	userDef := fs.Bool("user-default", false, "every user (the default)")
	client := fs.String("client-id", "", "a client ID")
	clientDef := fs.Bool("client-id-default", false, "every client ID (the default)")
	ip := fs.String("ip", "", "an IP address")
	ipDef := fs.Bool("ip-default", false, "every IP address (the default)")
	strict := fs.Bool("strict", false, "list: only entities with exactly the types given")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	var entity kadm.ClientQuotaEntity
	add := func(typ, name string, def bool) bool {
		if name != "" && def {
			fmt.Fprintf(stderr, "strata quota: give --%s or --%s-default, not both\n", typ, typ)
			return false
		}
		switch {
		case def:
			entity = append(entity, kadm.ClientQuotaEntityComponent{Type: typ})
		case name != "":
			n := name
			entity = append(entity, kadm.ClientQuotaEntityComponent{Type: typ, Name: &n})
		}
		return true
	}
	if !add("user", *user, *userDef) || !add("client-id", *client, *clientDef) || !add("ip", *ip, *ipDef) {
		return exitConfig
	}
	switch sub {
	case "set", "remove":
		if len(entity) == 0 || len(pos) == 0 {
			fmt.Fprint(stderr, quotaUsage)
			return exitConfig
		}
	case "list":
		if len(pos) != 0 {
			fmt.Fprint(stderr, quotaUsage)
			return exitConfig
		}
	default:
		fmt.Fprintf(stderr, "strata quota: unknown subcommand %q\n\n%s", sub, quotaUsage)
		return exitConfig
	}
	var ops []kadm.AlterClientQuotaOp
	for _, p := range pos {
		if sub == "remove" {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: p, Remove: true})
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil {
			fmt.Fprintf(stderr, "strata quota set: %q is not KEY=NUMBER\n", p)
			return exitConfig
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	adm, ctx, closing, err := a.connect()
	if err != nil {
		fmt.Fprintln(stderr, "strata quota:", err)
		return exitError
	}
	defer closing()
	if sub != "list" {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
		if err == nil && len(res) == 1 && res[0].Err != nil {
			err = fmt.Errorf("%v: %s", res[0].Err, res[0].ErrMessage)
		}
		if err != nil {
			fmt.Fprintf(stderr, "strata quota %s: %v\n", sub, err)
			return exitError
		}
		fmt.Fprintf(stdout, "quotas of %s updated\n", entityString(entity))
		return exitOK
	}
	var filter []kadm.DescribeClientQuotaComponent
	for _, c := range entity {
		f := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: 0}
		if c.Name == nil {
			f.MatchType = 1
		}
		filter = append(filter, f)
	}
	got, err := adm.DescribeClientQuotas(ctx, *strict, filter)
	if err != nil {
		fmt.Fprintln(stderr, "strata quota list:", err)
		return exitError
	}
	lines := make([]string, 0, len(got))
	for _, q := range got {
		var vals []string
		for _, v := range q.Values {
			vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		sort.Strings(vals)
		lines = append(lines, entityString(q.Entity)+"\t"+strings.Join(vals, " "))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	return exitOK
}

// entityString is user=alice,client-id=<default>.
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, 0, len(e))
	for _, c := range e {
		n := "<default>"
		if c.Name != nil {
			n = *c.Name
		}
		parts = append(parts, c.Type+"="+n)
	}
	return strings.Join(parts, ",")
}
