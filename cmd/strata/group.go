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
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// groupCommand runs `strata group list|describe|reset-offsets`, an admin
// client (kadm) in the spirit of kafka-consumer-groups: it works against
// any Kafka-compatible broker.
func groupCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, groupUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	switch args[0] {
	case "list", "describe", "reset-offsets":
	default:
		fmt.Fprintf(stderr, "strata group: unknown command %q\n\n%s", args[0], groupUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("group "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	var ro resetOptions
	if args[0] == "reset-offsets" {
		fs.StringVar(&ro.topic, "topic", "", "topic whose offsets to reset (required)")
		fs.BoolVar(&ro.earliest, "to-earliest", false, "reset to the log start offset")
		fs.BoolVar(&ro.latest, "to-latest", false, "reset to the log end offset")
		fs.StringVar(&ro.datetime, "to-datetime", "", "reset to the first offset at or after `TIME` (RFC 3339, YYYY-MM-DDTHH:MM:SS[.sss] local time, or Unix milliseconds)")
		fs.StringVar(&ro.offset, "to-offset", "", "reset to offset `N` (clamped to the log)")
		fs.StringVar(&ro.shift, "shift-by", "", "move the committed offset by `N` (negative = back; clamped)")
		fs.BoolVar(&ro.execute, "execute", false, "commit the new offsets (without it, only the plan is printed)")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	want := map[string]int{"list": 0, "describe": 1, "reset-offsets": 1}[args[0]]
	if len(pos) != want {
		fmt.Fprintf(stderr, "strata group %s: want %d argument(s), got %d\n\n%s", args[0], want, len(pos), groupUsage)
		return exitConfig
	}
	adm, ctx, closing, err := af.connect()
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitConfig
	}
	defer closing()
	switch args[0] {
	case "list":
		err = groupList(ctx, adm, stdout)
	case "describe":
		err = groupDescribe(ctx, adm, pos[0], stdout)
	default:
		ro.group = pos[0]
		err = groupReset(ctx, adm, ro, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitCodeFor(err)
	}
	return exitOK
}

const groupUsage = `Usage: strata group <command> [flags]

Commands:
  list                       list the consumer groups (name, state, protocol type)
  describe GROUP             committed offset, log end offset, lag, member, client id and host per partition
  reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-datetime TIME | --to-offset N | --shift-by N) [--execute]
                             print the plan (old offset, new offset, lag before and after); change
                             nothing unless --execute; refuse while the group has members

Every command takes --bootstrap-server host:port (default 127.0.0.1:9092).
`

func envOr(environ []string, key, def string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key && v != "" {
			return v
		}
	}
	return def
}

func groupList(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE")
	for _, g := range listed.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
	}
	return tw.Flush()
}

func groupDescribe(ctx context.Context, adm *kadm.Client, group string, w io.Writer) error {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return err
	}
	l, ok := lags[group]
	if !ok {
		return fmt.Errorf("group %q: no answer", group)
	}
	if errors.Is(l.DescribeErr, kerr.GroupIDNotFound) {
		// Not a classic group: maybe a KIP-848 consumer group.
		return describeConsumerGroup(ctx, adm, group, w)
	}
	if err := l.Error(); err != nil {
		return fmt.Errorf("group %q: %w", group, err)
	}
	fmt.Fprintf(w, "GROUP %s  STATE %s  PROTOCOL %s/%s  COORDINATOR %d  MEMBERS %d\n\n", group, l.State, l.ProtocolType, l.Protocol, l.Coordinator.NodeID, len(l.Members))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER-ID\tCLIENT-ID\tHOST")
	var total int64
	for _, ml := range l.Lag.Sorted() {
		cur, lag := "-", "-"
		if ml.Commit.At >= 0 {
			cur = strconv.FormatInt(ml.Commit.At, 10)
		}
		if ml.Lag >= 0 {
			lag = strconv.FormatInt(ml.Lag, 10)
			total += ml.Lag
		}
		member, client, host := "-", "-", "-"
		if ml.Member != nil {
			member, client, host = ml.Member.MemberID, ml.Member.ClientID, ml.Member.ClientHost
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", ml.Topic, ml.Partition, cur, ml.End.Offset, lag, member, client, host)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nTOTAL LAG %d\n", total)
	return nil
}

// describeConsumerGroup is describe for a KIP-848 consumer group
// (ConsumerGroupDescribe, which kadm's Lag does not use).
func describeConsumerGroup(ctx context.Context, adm *kadm.Client, group string, w io.Writer) error {
	cgs, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return err
	}
	g, ok := cgs[group]
	if !ok {
		return fmt.Errorf("group %q: no answer", group)
	}
	if g.Err != nil {
		return fmt.Errorf("group %q: %w", group, g.Err)
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	type owner struct{ member, client, host string }
	owners := map[string]map[int32]owner{}
	topics := map[string]bool{}
	for _, m := range g.Members {
		for t, ps := range m.Assignment {
			topics[t] = true
			if owners[t] == nil {
				owners[t] = map[int32]owner{}
			}
			for p := range ps {
				owners[t][p] = owner{m.MemberID, m.ClientID, m.ClientHost}
			}
		}
	}
	commits.Each(func(o kadm.OffsetResponse) { topics[o.Topic] = true })
	var names []string
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GROUP %s  STATE %s  PROTOCOL consumer/%s (KIP-848)  EPOCH %d  COORDINATOR %d  MEMBERS %d\n\n", group, g.State, g.AssignorName, g.Epoch, g.Coordinator.NodeID, len(g.Members))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER-ID\tCLIENT-ID\tHOST")
	var total int64
	for _, t := range names {
		var parts []int32
		for p := range ends[t] {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			end, _ := ends.Lookup(t, p)
			cur, lag := "-", "-"
			if c, ok := commits.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
				cur = strconv.FormatInt(c.At, 10)
				lag = strconv.FormatInt(end.Offset-c.At, 10)
				total += end.Offset - c.At
			}
			o, ok := owners[t][p]
			if !ok {
				o = owner{"-", "-", "-"}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", t, p, cur, end.Offset, lag, o.member, o.client, o.host)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nTOTAL LAG %d\n", total)
	return nil
}

type resetOptions struct {
	group, topic            string
	earliest, latest        bool
	datetime, offset, shift string
	execute                 bool
}

// errGroupActive refuses a reset while the group has members, as
// kafka-consumer-groups does: their next commit would undo it.
var errGroupActive = errors.New("group has active members")

func groupReset(ctx context.Context, adm *kadm.Client, o resetOptions, w io.Writer) error {
	n := 0
	for _, set := range []bool{o.earliest, o.latest, o.datetime != "", o.offset != "", o.shift != ""} {
		if set {
			n++
		}
	}
	if o.topic == "" || n != 1 {
		return fmt.Errorf("%w: reset-offsets needs --topic and exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by", errConfig)
	}
	var target int64
	var err error
	switch {
	case o.datetime != "":
		target, err = parseResetTime(o.datetime)
	case o.offset != "":
		target, err = strconv.ParseInt(o.offset, 10, 64)
	case o.shift != "":
		target, err = strconv.ParseInt(o.shift, 10, 64)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	described, err := adm.DescribeGroups(ctx, o.group)
	if err != nil {
		return err
	}
	if d, ok := described[o.group]; ok && d.Err == nil && len(d.Members) > 0 {
		return fmt.Errorf("%w: group %q is %s with %d member(s); stop its consumers first", errGroupActive, o.group, d.State, len(d.Members))
	} else if ok && errors.Is(d.Err, kerr.GroupIDNotFound) {
		cgs, err := adm.DescribeConsumerGroups(ctx, o.group)
		if cg, ok := cgs[o.group]; err == nil && ok && cg.Err == nil && len(cg.Members) > 0 {
			return fmt.Errorf("%w: consumer group %q is %s with %d member(s); stop its consumers first", errGroupActive, o.group, cg.State, len(cg.Members))
		}
	}
	starts, err := adm.ListStartOffsets(ctx, o.topic)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, o.topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	if _, ok := ends[o.topic]; !ok {
		return fmt.Errorf("topic %q not found", o.topic)
	}
	var byTime kadm.ListedOffsets
	if o.datetime != "" {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, target, o.topic); err != nil {
			return err
		}
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, o.group, o.topic)
	if err != nil {
		return err
	}
	var parts []int32
	for p := range ends[o.topic] {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	plan := make(kadm.Offsets)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOLD-OFFSET\tNEW-OFFSET\tLAG-BEFORE\tLAG-AFTER")
	for _, p := range parts {
		start, _ := starts.Lookup(o.topic, p)
		end, _ := ends.Lookup(o.topic, p)
		old := int64(-1)
		if c, ok := committed.Lookup(o.topic, p); ok && c.Err == nil {
			old = c.At
		}
		var next int64
		switch {
		case o.earliest:
			next = start.Offset
		case o.latest:
			next = end.Offset
		case o.datetime != "":
			next = end.Offset
			if t, ok := byTime.Lookup(o.topic, p); ok && t.Err == nil && t.Offset >= 0 {
				next = t.Offset
			}
		case o.offset != "":
			next = target
		default:
			base := old
			if base < 0 {
				base = start.Offset // Kafka shifts an uncommitted partition from the start
			}
			next = base + target
		}
		next = max(start.Offset, min(next, end.Offset))
		lagBefore := "-"
		if old >= 0 {
			lagBefore = strconv.FormatInt(end.Offset-old, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\n", o.topic, p, offsetString(old), next, lagBefore, end.Offset-next)
		plan.Add(kadm.Offset{Topic: o.topic, Partition: p, At: next, LeaderEpoch: -1})
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !o.execute {
		fmt.Fprintln(w, "\nDry run: nothing changed. Add --execute to commit these offsets.")
		return nil
	}
	resps, err := adm.CommitOffsets(ctx, o.group, plan)
	if err != nil {
		return err
	}
	if err := resps.Error(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fmt.Fprintf(w, "\nCommitted %d offset(s) for group %s.\n", len(parts), o.group)
	return nil
}

func offsetString(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// parseResetTime accepts RFC 3339, Kafka's YYYY-MM-DDTHH:mm:SS[.sss]
// (local time, as kafka-consumer-groups reads it), or Unix milliseconds.
func parseResetTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("--to-datetime %q: want RFC 3339, YYYY-MM-DDTHH:MM:SS[.sss] or Unix milliseconds", s)
}
