package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicUsage = `Usage: strata topic <command> [flags] [topic...]

Commands (an admin client: works against any Kafka-compatible broker):
  create NAME...            create topics
      --partitions N          partitions (default: the broker's num.partitions)
      --replication-factor N  replicas per partition (default: the broker's)
      --config KEY=VALUE      a topic config override (repeatable)
      --if-not-exists         no error when the topic exists
  list                      list topics with their partition and replica counts
      --exclude-internal      leave out internal topics (__consumer_offsets, ...)
  describe NAME...          partitions, leaders, replicas, offsets and the
                            topic's config overrides (kafka-topics --describe)
      --all-configs           every config with its value and source
  alter-config NAME...      change topic configs without a restart
      --set KEY=VALUE         set an override (repeatable)
      --delete KEY            remove an override: back to the default (repeatable)
      --append KEY=VALUE      add to a list config such as cleanup.policy
      --subtract KEY=VALUE    remove from a list config
      --dry-run               validate only
  add-partitions NAME...    grow topics
      --partitions N          the new total number of partitions (required)
  delete NAME...            delete topics and their data

Common flags:
  --bootstrap-server HOST:PORT[,...]  (env STRATA_BOOTSTRAP_SERVER, default 127.0.0.1:9092)
  --timeout DURATION                  (default 30s)
`

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// topicOptions are the flags of every topic subcommand (each uses some).
type topicOptions struct {
	partitions      int
	replication     int
	configs         multiFlag
	ifNotExists     bool
	excludeInternal bool
	allConfigs      bool
	alterations     alterFlags
}

// alterFlags are alter-config's flags, shared by topic and broker.
type alterFlags struct {
	set, del    multiFlag
	append, sub multiFlag
	dryRun      bool
}

func (a *alterFlags) register(fs *flag.FlagSet) {
	fs.Var(&a.set, "set", "set `KEY=VALUE` (repeatable)")
	fs.Var(&a.del, "delete", "remove the value of `KEY` (repeatable)")
	fs.Var(&a.append, "append", "append `KEY=VALUE` to a list config (repeatable)")
	fs.Var(&a.sub, "subtract", "subtract `KEY=VALUE` from a list config (repeatable)")
	fs.BoolVar(&a.dryRun, "dry-run", false, "validate only")
}

func (a *alterFlags) empty() bool { return len(a.set)+len(a.del)+len(a.append)+len(a.sub) == 0 }

// report prints what was changed (or validated, with --dry-run) on what.
func (a *alterFlags) report(w io.Writer, what string, done []string) {
	if a.dryRun {
		fmt.Fprintf(w, "Validated config change for %s (dry run, nothing changed): %s.\n", what, strings.Join(done, ", "))
	} else {
		fmt.Fprintf(w, "Completed updating config for %s: %s.\n", what, strings.Join(done, ", "))
	}
}

// build turns the flags into IncrementalAlterConfigs operations and the
// words that report them ("set k=v", "deleted k", ...).
func (a *alterFlags) build() ([]kadm.AlterConfig, []string, error) {
	var alters []kadm.AlterConfig
	var done []string
	add := func(op kadm.IncrementalOp, list []string, verb string) error {
		for _, kv := range list {
			k, v, err := splitKV(kv)
			if err != nil {
				return err
			}
			alters = append(alters, kadm.AlterConfig{Op: op, Name: k, Value: &v})
			done = append(done, fmt.Sprintf("%s %s=%s", verb, k, v))
		}
		return nil
	}
	if err := add(kadm.SetConfig, a.set, "set"); err != nil {
		return nil, nil, err
	}
	for _, k := range a.del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: strings.TrimSpace(k)})
		done = append(done, "deleted "+strings.TrimSpace(k))
	}
	if err := add(kadm.AppendConfig, a.append, "appended"); err != nil {
		return nil, nil, err
	}
	if err := add(kadm.SubtractConfig, a.sub, "subtracted"); err != nil {
		return nil, nil, err
	}
	return alters, done, nil
}

// topicCommand runs `strata topic create|list|describe|alter-config|
// add-partitions|delete` over kadm.
func topicCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, topicUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	cmd := args[0]
	switch cmd {
	case "create", "list", "describe", "alter-config", "add-partitions", "delete":
	default:
		fmt.Fprintf(stderr, "strata topic: unknown command %q\n\n%s", cmd, topicUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("topic "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	var o topicOptions
	switch cmd {
	case "create":
		fs.IntVar(&o.partitions, "partitions", -1, "partitions (-1 = the broker's num.partitions)")
		fs.IntVar(&o.replication, "replication-factor", -1, "replicas per partition (-1 = the broker's default)")
		fs.Var(&o.configs, "config", "topic config override `KEY=VALUE` (repeatable)")
		fs.BoolVar(&o.ifNotExists, "if-not-exists", false, "no error when the topic exists")
	case "list":
		fs.BoolVar(&o.excludeInternal, "exclude-internal", false, "leave out internal topics")
	case "describe":
		fs.BoolVar(&o.allConfigs, "all-configs", false, "every config with its value and source")
	case "alter-config":
		o.alterations.register(fs)
	case "add-partitions":
		fs.IntVar(&o.partitions, "partitions", 0, "the new total number of partitions")
	}
	names, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	if cmd == "list" && len(names) > 0 || cmd != "list" && len(names) == 0 {
		fmt.Fprintf(stderr, "strata topic %s: wrong number of topic names (%d)\n\n%s", cmd, len(names), topicUsage)
		return exitConfig
	}
	if cmd == "add-partitions" && o.partitions <= 0 {
		fmt.Fprintf(stderr, "strata topic add-partitions: --partitions N (the new total) is required\n")
		return exitConfig
	}
	if cmd == "alter-config" && o.alterations.empty() {
		fmt.Fprintf(stderr, "strata topic alter-config: nothing to change (--set, --delete, --append, --subtract)\n")
		return exitConfig
	}
	adm, ctx, closing, err := af.connect()
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitConfig
	}
	defer closing()

	switch cmd {
	case "create":
		err = topicCreate(ctx, adm, names, &o, stdout)
	case "list":
		err = topicList(ctx, adm, &o, stdout)
	case "describe":
		err = topicDescribe(ctx, adm, names, &o, stdout)
	case "alter-config":
		err = topicAlterConfig(ctx, adm, names, &o, stdout)
	case "add-partitions":
		err = topicAddPartitions(ctx, adm, names, o.partitions, stdout)
	case "delete":
		err = topicDelete(ctx, adm, names, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata topic %s: %v\n", cmd, err)
		return exitError
	}
	return exitOK
}

// errMsg adds a broker's error message to its error code.
func errMsg(err error, msg string) error {
	if msg == "" || strings.Contains(err.Error(), msg) {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

func splitKV(kv string) (string, string, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return "", "", fmt.Errorf("%q is not KEY=VALUE", kv)
	}
	return strings.TrimSpace(k), v, nil
}

func topicCreate(ctx context.Context, adm *kadm.Client, names []string, o *topicOptions, w io.Writer) error {
	configs := map[string]*string{}
	for _, kv := range o.configs {
		k, v, err := splitKV(kv)
		if err != nil {
			return err
		}
		configs[k] = &v
	}
	resps, err := adm.CreateTopics(ctx, int32(o.partitions), int16(o.replication), configs, names...)
	if err != nil {
		return err
	}
	var exists func(error) bool
	if o.ifNotExists {
		exists = func(err error) bool { return strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") }
	}
	return reportAnswers(names, func(n string) (answer, bool) {
		r, ok := resps[n]
		return answer{r.Err, r.ErrMessage}, ok
	}, exists, func(n string) { fmt.Fprintf(w, "Created topic %s.\n", n) })
}

func topicList(ctx context.Context, adm *kadm.Client, o *topicOptions, w io.Writer) error {
	var tds kadm.TopicDetails
	var err error
	if o.excludeInternal {
		tds, err = adm.ListTopics(ctx)
	} else {
		tds, err = adm.ListTopicsWithInternal(ctx)
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPARTITIONS\tREPLICAS")
	for _, td := range tds.Sorted() {
		if td.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t%v\n", td.Topic, td.Err)
			continue
		}
		rf := 0
		for _, p := range td.Partitions {
			rf = max(rf, len(p.Replicas))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\n", td.Topic, len(td.Partitions), rf)
	}
	return tw.Flush()
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

var sourceNames = map[kmsg.ConfigSource]string{
	kmsg.ConfigSourceDynamicTopicConfig:         "DYNAMIC_TOPIC_CONFIG",
	kmsg.ConfigSourceDynamicBrokerConfig:        "DYNAMIC_BROKER_CONFIG",
	kmsg.ConfigSourceDynamicDefaultBrokerConfig: "DYNAMIC_DEFAULT_BROKER_CONFIG",
	kmsg.ConfigSourceStaticBrokerConfig:         "STATIC_BROKER_CONFIG",
	kmsg.ConfigSourceDefaultConfig:              "DEFAULT_CONFIG",
}

// sourceName is a config source as Kafka's tools print it.
func sourceName(s kmsg.ConfigSource) string {
	if n := sourceNames[s]; n != "" {
		return n
	}
	return s.String()
}

// topicDescribe prints kafka-topics --describe's layout, with each
// partition's log start offset and high watermark added at the end of its
// line.
func topicDescribe(ctx context.Context, adm *kadm.Client, names []string, o *topicOptions, w io.Writer) error {
	tds, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return err
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return err
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return err
	}
	var failed []error
	for i, n := range names {
		td, ok := tds[n]
		if !ok || td.Err != nil {
			e := td.Err
			if e == nil {
				e = errors.New("no such topic")
			}
			failed = append(failed, fmt.Errorf("%s: %w", n, e))
			continue
		}
		rc, err := rcs.On(n, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: configs: %w", n, err))
			continue
		}
		var overrides []string
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				overrides = append(overrides, c.Key+"="+*c.Value)
			}
		}
		sort.Strings(overrides)
		rf := 0
		for _, p := range td.Partitions {
			rf = max(rf, len(p.Replicas))
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			n, base64.RawURLEncoding.EncodeToString(td.ID[:]), len(td.Partitions), rf, strings.Join(overrides, ","))
		for _, p := range td.Partitions.Sorted() {
			lso, hw := "-", "-"
			if s, ok := starts.Lookup(n, p.Partition); ok && s.Err == nil {
				lso = strconv.FormatInt(s.Offset, 10)
			}
			if e, ok := ends.Lookup(n, p.Partition); ok && e.Err == nil {
				hw = strconv.FormatInt(e.Offset, 10)
			}
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\tLogStartOffset: %s\tHighWatermark: %s\n",
				n, p.Partition, p.Leader, joinIDs(p.Replicas), joinIDs(p.ISR), lso, hw)
		}
		if o.allConfigs {
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "\tKEY\tVALUE\tSOURCE")
			sorted := append([]kadm.Config(nil), rc.Configs...)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
			for _, c := range sorted {
				v := "null"
				if c.Value != nil {
					v = *c.Value
				}
				fmt.Fprintf(tw, "\t%s\t%s\t%s\n", c.Key, v, sourceName(c.Source))
			}
			tw.Flush()
		}
	}
	return errors.Join(failed...)
}

func topicAlterConfig(ctx context.Context, adm *kadm.Client, names []string, o *topicOptions, w io.Writer) error {
	alters, done, err := o.alterations.build()
	if err != nil {
		return err
	}
	alter := adm.AlterTopicConfigs
	if o.alterations.dryRun {
		alter = adm.ValidateAlterTopicConfigs
	}
	resps, err := alter(ctx, alters, names...)
	if err != nil {
		return err
	}
	byName := map[string]kadm.AlterConfigsResponse{}
	for _, r := range resps {
		byName[r.Name] = r
	}
	return reportAnswers(names, func(n string) (answer, bool) {
		r, ok := byName[n]
		return answer{r.Err, r.ErrMessage}, ok
	}, nil, func(n string) { o.alterations.report(w, "topic "+n, done) })
}

func topicAddPartitions(ctx context.Context, adm *kadm.Client, names []string, total int, w io.Writer) error {
	resps, err := adm.UpdatePartitions(ctx, total, names...)
	if err != nil {
		return err
	}
	return reportAnswers(names, func(n string) (answer, bool) {
		r, ok := resps[n]
		return answer{r.Err, r.ErrMessage}, ok
	}, nil, func(n string) { fmt.Fprintf(w, "Topic %s now has %d partitions.\n", n, total) })
}

func topicDelete(ctx context.Context, adm *kadm.Client, names []string, w io.Writer) error {
	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	return reportAnswers(names, func(n string) (answer, bool) {
		r, ok := resps[n]
		return answer{r.Err, r.ErrMessage}, ok
	}, nil, func(n string) { fmt.Fprintf(w, "Deleted topic %s.\n", n) })
}
