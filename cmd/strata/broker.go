package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const brokerUsage = `Usage: strata broker <command> [flags]

Commands (an admin client: works against any Kafka-compatible broker):
  describe-config           a broker's configs (kafka-configs --describe --entity-type brokers)
      --broker ID             this broker (repeatable; default: every broker)
      --default               the cluster-wide dynamic defaults instead
      --all                   every config, not only the dynamic ones
  alter-config              change dynamic broker configs without a restart
      --broker ID             for this broker only (DYNAMIC_BROKER_CONFIG)
      --default               for every broker (DYNAMIC_DEFAULT_BROKER_CONFIG)
      --set KEY=VALUE         set a value (repeatable)
      --delete KEY            remove a dynamic value (repeatable)
      --append KEY=VALUE      add to a list config such as log.cleanup.policy
      --subtract KEY=VALUE    remove from a list config
      --dry-run               validate only

Dynamic settings (as Kafka's): the broker defaults of topic configs --
log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms,
log.cleanup.policy, log.cleaner.delete.retention.ms, log.flush.interval.ms,
message.max.bytes, ... and log.cleaner.backoff.ms (describe-config --all
lists the others as static).

Common flags:
  --bootstrap-server HOST:PORT[,...]  (env STRATA_BOOTSTRAP_SERVER, default 127.0.0.1:9092)
  --timeout DURATION                  (default 30s)
`

// brokerOptions are the flags of the broker subcommands.
type brokerOptions struct {
	brokers     multiFlag
	defaults    bool
	all         bool
	alterations alterFlags
}

// brokerCommand runs `strata broker describe-config|alter-config` over kadm.
func brokerCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, brokerUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	cmd := args[0]
	if cmd != "describe-config" && cmd != "alter-config" {
		fmt.Fprintf(stderr, "strata broker: unknown command %q\n\n%s", cmd, brokerUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("broker "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	var o brokerOptions
	fs.Var(&o.brokers, "broker", "broker `ID` (repeatable)")
	fs.BoolVar(&o.defaults, "default", false, "the cluster-wide default")
	if cmd == "describe-config" {
		fs.BoolVar(&o.all, "all", false, "every config, not only the dynamic ones")
	} else {
		o.alterations.register(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata broker %s: unexpected arguments %v\n\n%s", cmd, fs.Args(), brokerUsage)
		return exitConfig
	}
	ids, err := parseBrokerIDs(o.brokers)
	if err != nil {
		fmt.Fprintf(stderr, "strata broker %s: %v\n", cmd, err)
		return exitConfig
	}
	if o.defaults && len(ids) > 0 {
		fmt.Fprintf(stderr, "strata broker %s: --broker and --default exclude each other\n", cmd)
		return exitConfig
	}
	if cmd == "alter-config" {
		if len(ids) != 1 && !o.defaults {
			fmt.Fprintf(stderr, "strata broker alter-config: say which: --broker ID (one) or --default\n")
			return exitConfig
		}
		if o.alterations.empty() {
			fmt.Fprintf(stderr, "strata broker alter-config: nothing to change (--set, --delete, --append, --subtract)\n")
			return exitConfig
		}
	}
	adm, ctx, closing, err := af.connect()
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitConfig
	}
	defer closing()
	if cmd == "describe-config" {
		err = brokerDescribeConfig(ctx, adm, ids, &o, stdout)
	} else {
		err = brokerAlterConfig(ctx, adm, ids, &o, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata broker %s: %v\n", cmd, err)
		return exitError
	}
	return exitOK
}

func parseBrokerIDs(list []string) ([]int32, error) {
	var ids []int32
	for _, s := range list {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--broker %q is not a broker ID", s)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// brokerDescribeConfig prints kafka-configs --describe's layout: a heading
// per resource, then KEY=VALUE sensitive=... synonyms={SOURCE:KEY=VALUE, ...}.
func brokerDescribeConfig(ctx context.Context, adm *kadm.Client, ids []int32, o *brokerOptions, w io.Writer) error {
	if !o.defaults && len(ids) == 0 {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		for _, b := range md.Brokers {
			ids = append(ids, b.NodeID)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
	if err != nil && len(rcs) == 0 {
		return err
	}
	var failed []error
	for i, rc := range rcs {
		if rc.Err != nil {
			failed = append(failed, fmt.Errorf("broker %q: %w", rc.Name, rc.Err))
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		what := "Dynamic configs"
		if o.all {
			what = "All configs"
		}
		if rc.Name == "" {
			fmt.Fprintln(w, "Default configs for brokers in the cluster are:")
		} else {
			fmt.Fprintf(w, "%s for broker %s are:\n", what, rc.Name)
		}
		sorted := append([]kadm.Config(nil), rc.Configs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
		for _, c := range sorted {
			if !o.all && rc.Name != "" && !dynamicSource(c) {
				continue
			}
			syns := make([]string, len(c.Synonyms))
			for j, s := range c.Synonyms {
				syns[j] = fmt.Sprintf("%s:%s=%s", sourceName(s.Source), s.Key, valueOrNull(s.Value))
			}
			fmt.Fprintf(w, "  %s=%s sensitive=%t synonyms={%s}\n", c.Key, valueOrNull(c.Value), c.Sensitive, strings.Join(syns, ", "))
		}
	}
	if err != nil {
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

// dynamicSource reports whether a broker config is set dynamically.
func dynamicSource(c kadm.Config) bool {
	return c.Source == 2 || c.Source == 3 // DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
}

func valueOrNull(v *string) string {
	if v == nil {
		return "null"
	}
	return *v
}

func brokerAlterConfig(ctx context.Context, adm *kadm.Client, ids []int32, o *brokerOptions, w io.Writer) error {
	alters, done, err := o.alterations.build()
	if err != nil {
		return err
	}
	alter := adm.AlterBrokerConfigs
	if o.alterations.dryRun {
		alter = adm.ValidateAlterBrokerConfigs
	}
	resps, err := alter(ctx, alters, ids...)
	if err != nil {
		return err
	}
	what := "the cluster-wide default"
	if len(ids) == 1 {
		what = "broker " + strconv.Itoa(int(ids[0]))
	}
	if len(resps) != 1 {
		return fmt.Errorf("%s: %d answers", what, len(resps))
	}
	if r := resps[0]; r.Err != nil {
		return fmt.Errorf("%s: %w", what, errMsg(r.Err, r.ErrMessage))
	}
	o.alterations.report(w, what, done)
	return nil
}
