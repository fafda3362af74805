package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/strata-io/strata/internal/dlq"
)

// `strata dlq list|inspect|redrive`: share groups' dead-letter topics
// (internal/dlq does the work; a console calls the same functions).

const dlqUsage = `Usage: strata dlq <command> [flags]

Commands:
  list                       share groups with a dead-letter topic: letters waiting, oldest age, reasons
  inspect --group G [--reason R] [--sample N]
                             one group's letters waiting: by reason and source, the oldest N
  redrive --group G [--to TOPIC] [--reason R] [--since T] [--max N] [--limit N] [--execute]
                             re-publish dead letters' records (key, value, headers) to their
                             source topic (or TOPIC) with a strata.redrive.count header; without
                             --execute only a plan (counts by reason and source) is printed.
                             Each record moves once: the batch and its progress commit in one
                             transaction (transactional ID strata-dlq-redrive.G, progress in the
                             consumer groups strata-dlq-redrive.G.<reason>), so a run killed
                             halfway and run again moves nothing twice. A record already redriven
                             --limit times (default 3) is refused and stays. --since takes letters
                             written at or after T (RFC 3339, or a duration ago such as 2h).

Flags common to every command:
  --bootstrap-server host:port[,host:port]  (env STRATA_BOOTSTRAP_SERVER; default 127.0.0.1:9092)
  --timeout D                               give up after D (default 30s; redrive 10m)

Reasons: max-deliveries, rejected, ttl-expired, redrive-limit, topic-deleted, other.
`

func dlqCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, dlqUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	cmd := args[0]
	if cmd != "list" && cmd != "inspect" && cmd != "redrive" {
		fmt.Fprintf(stderr, "strata dlq: unknown command %q\n\n%s", cmd, dlqUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("dlq "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	var (
		group, topic, reason, to, since string
		sample, maxN, limit, batch      int
		execute                         bool
	)
	if cmd != "list" {
		fs.StringVar(&group, "group", "", "the share group")
		fs.StringVar(&topic, "dlq", "", "the dead-letter topic (default: the group's errors.deadletterqueue.topic.name)")
		fs.StringVar(&reason, "reason", "", "only letters of this reason")
	}
	if cmd == "inspect" {
		fs.IntVar(&sample, "sample", 10, "show the oldest N waiting letters")
	}
	if cmd == "redrive" {
		fs.StringVar(&to, "to", "", "re-publish to this topic (default: each letter's source topic)")
		fs.StringVar(&since, "since", "", "only letters written at or after this time (RFC 3339, or a duration ago)")
		fs.IntVar(&maxN, "max", 0, "re-publish at most N records (0: all)")
		fs.IntVar(&limit, "limit", dlq.DefaultLimit, "refuse records already redriven this many times")
		fs.IntVar(&batch, "batch", 500, "records per transaction")
		fs.BoolVar(&execute, "execute", false, "re-publish (without it: print the plan only)")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err == flag.ErrHelp {
		return exitOK
	}
	if err != nil {
		return exitConfig
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "strata dlq %s: unexpected arguments %q\n", cmd, pos)
		return exitConfig
	}
	if cmd != "list" && group == "" {
		fmt.Fprintf(stderr, "strata dlq %s: --group is required\n", cmd)
		return exitConfig
	}
	timeout := af.timeout
	if cmd == "redrive" {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "timeout" })
		if !set {
			timeout = 10 * time.Minute
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seeds := strings.Split(af.bootstrap, ",")
	switch cmd {
	case "list":
		err = dlqList(ctx, seeds, stdout)
	case "inspect":
		err = dlqInspect(ctx, seeds, group, topic, reason, sample, stdout)
	default:
		o := dlq.Options{Seeds: seeds, Group: group, Topic: topic, To: to, Reason: reason, Max: maxN, Limit: limit, Batch: batch, Execute: execute}
		if since != "" {
			if o.Since, err = parseSince(since, time.Now()); err != nil {
				fmt.Fprintf(stderr, "strata dlq redrive: --since: %v\n", err)
				return exitConfig
			}
		}
		// Fault injection for the tests: SIGKILL this process after
		// the Nth batch was produced and before its transaction
		// commits.
		if n, _ := strconv.Atoi(envOr(environ, "STRATA_DLQ_REDRIVE_KILL_AFTER", "")); n > 0 {
			o.AfterProduce = func(b int) error {
				if b == n {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				return nil
			}
		}
		var rep *dlq.Report
		rep, err = dlq.Redrive(ctx, o)
		if rep != nil {
			printRedrive(rep, o, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitError
	}
	return exitOK
}

// parseSince reads an RFC 3339 time or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339, s)
}

func dlqList(ctx context.Context, seeds []string, w io.Writer) error {
	ds, err := dlq.List(ctx, seeds)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tDLQ TOPIC\tWAITING\tTOTAL\tOLDEST AGE\tREASONS")
	for _, d := range ds {
		if d.Letters < 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t(topic not readable)\n", d.Group, d.Topic)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", d.Group, d.Topic, d.Letters, d.Total, age(d, now), counts(d.ByReason))
	}
	return tw.Flush()
}

func age(d *dlq.Depth, now time.Time) string {
	if d.Oldest.IsZero() {
		return "-"
	}
	return d.Age(now).Round(time.Second).String()
}

// counts prints "a=1 b=2" sorted by key.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

func dlqInspect(ctx context.Context, seeds []string, group, topic, reason string, sample int, w io.Writer) error {
	d, err := dlq.Inspect(ctx, seeds, group, topic, reason, sample)
	if err != nil {
		return err
	}
	now := time.Now()
	fmt.Fprintf(w, "Group %s, dead-letter topic %s: %d letters waiting (of %d in the topic), oldest %s\n", d.Group, d.Topic, d.Letters, d.Total, age(d, now))
	fmt.Fprintf(w, "By reason: %s\nBy source: %s\n", counts(d.ByReason), counts(d.BySource))
	if len(d.Sample) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DLQ OFFSET\tWRITTEN\tREASON\tSOURCE\tOFFSET\tDELIVERIES\tREDRIVES\tMEMBER\tKEY\tVALUE")
	for _, l := range d.Sample {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%q\t%q\n", l.Partition, l.Offset, l.Time.UTC().Format(time.RFC3339), l.Reason,
			l.Source(), l.SourceOffset, l.DeliveryCount, l.Redrives, orDash(l.Member), l.Key, l.Value)
	}
	return tw.Flush()
}

func printRedrive(r *dlq.Report, o dlq.Options, w io.Writer) {
	to := o.To
	if to == "" {
		to = "their source topics"
	}
	if r.Executed {
		fmt.Fprintf(w, "Redrove %d records from %s to %s in %d transactions\n", r.Moved, r.Topic, to, r.Transactions)
	} else {
		fmt.Fprintf(w, "Plan (nothing changed; run again with --execute): %d records from %s to %s\n", r.Moved, r.Topic, to)
	}
	fmt.Fprintf(w, "By reason: %s\nBy source: %s\n", counts(r.ByReason), counts(r.BySource))
	if r.Unread > 0 {
		fmt.Fprintf(w, "%d letters hold no copy of their record: it is read back from its source at --execute (its redrive count is checked then)\n", r.Unread)
	}
	if r.Refused > 0 {
		fmt.Fprintf(w, "Refused (already redriven %d times; they stay): %d\n", o.Limit, r.Refused)
		for _, l := range r.RefusedSample {
			fmt.Fprintf(w, "  %s/%d/%d  %s offset %d  redrives=%d\n", r.Topic, l.Partition, l.Offset, l.Source(), l.SourceOffset, l.Redrives)
		}
	}
	if r.Gone > 0 {
		fmt.Fprintf(w, "Skipped, record no longer in its source (retention, or topic deleted): %d\n", r.Gone)
		for _, l := range r.GoneSample {
			fmt.Fprintf(w, "  %s/%d/%d  %s offset %d\n", r.Topic, l.Partition, l.Offset, l.Source(), l.SourceOffset)
		}
	}
	if r.Older > 0 {
		fmt.Fprintf(w, "Left, older than --since: %d\n", r.Older)
	}
}
