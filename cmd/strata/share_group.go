package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// shareGroupCommand runs `strata share-group
// list|describe|reset-offsets|delete|delete-offsets|resume`, an admin client
// (kadm) in the spirit of kafka-share-groups (KIP-932): it works against
// any broker that serves share groups.
func shareGroupCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, shareGroupUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	want, known := map[string]int{"list": 0, "describe": 1, "reset-offsets": 1, "delete": 1, "delete-offsets": 1, "resume": 1}[args[0]]
	if !known {
		fmt.Fprintf(stderr, "strata share-group: unknown command %q\n\n%s", args[0], shareGroupUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("share-group "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	var (
		states     string
		view       shareView
		metricsURL string
		ro         shareResetOptions
		topics     shareTopics
	)
	switch args[0] {
	case "list":
		fs.StringVar(&states, "state", "", "list only the groups in these `STATES` (comma-separated: Empty, Stable, Dead)")
	case "describe":
		fs.BoolVar(&view.members, "members", false, "the members: client id, host, assigned partitions")
		fs.BoolVar(&view.offsets, "offsets", false, "the share-partition start offset and lag per partition (the default)")
		fs.BoolVar(&view.state, "state", false, "the group's state, coordinator, epochs and member count")
		fs.StringVar(&metricsURL, "metrics-url", envOr(environ, "STRATA_METRICS_URL", ""),
			"with --offsets, also read records in flight and archived from these brokers' Prometheus `URLs` (comma-separated, e.g. http://host:9644/metrics; env STRATA_METRICS_URL)")
	case "reset-offsets":
		fs.StringVar(&ro.topic, "topic", "", "topic whose start offsets to reset, optionally `TOPIC[:P,P...]` with partitions (required)")
		fs.BoolVar(&ro.earliest, "to-earliest", false, "reset to the log start offset")
		fs.BoolVar(&ro.latest, "to-latest", false, "reset to the log end offset")
		fs.StringVar(&ro.datetime, "to-datetime", "", "reset to the first offset at or after `TIME` (RFC 3339, YYYY-MM-DDTHH:MM:SS[.sss] local time, or Unix milliseconds)")
		fs.StringVar(&ro.offset, "to-offset", "", "reset to offset `N` (clamped to the log)")
		fs.BoolVar(&ro.execute, "execute", false, "reset the start offsets (without it, only the plan is printed)")
		fs.Bool("dry-run", false, "print the plan only (the default; kafka-share-groups asks for it)")
	case "delete-offsets":
		fs.Var(&topics, "topic", "topic whose share-partition state to delete (repeatable, required)")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != want {
		fmt.Fprintf(stderr, "strata share-group %s: want %d argument(s), got %d\n\n%s", args[0], want, len(pos), shareGroupUsage)
		return exitConfig
	}
	if args[0] == "describe" && b2i(view.members)+b2i(view.offsets)+b2i(view.state) > 1 {
		fmt.Fprintf(stderr, "strata share-group describe: --members, --offsets and --state exclude each other\n")
		return exitConfig
	}
	if args[0] == "delete-offsets" && len(topics) == 0 {
		fmt.Fprintf(stderr, "strata share-group delete-offsets: --topic is required\n")
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
		err = shareList(ctx, adm, states, stdout)
	case "describe":
		switch {
		case view.members:
			err = shareDescribeMembers(ctx, adm, pos[0], stdout)
		case view.state:
			err = shareDescribeState(ctx, adm, pos[0], stdout)
		default:
			err = shareDescribeOffsets(ctx, adm, pos[0], metricsURL, stdout, stderr)
		}
		if err == nil {
			sharePausedNote(ctx, &af, pos[0], stdout)
		}
	case "resume":
		err = shareResume(ctx, &af, pos[0], stdout)
	case "reset-offsets":
		ro.group = pos[0]
		err = shareReset(ctx, adm, ro, stdout, stderr)
	case "delete":
		err = shareDelete(ctx, adm, pos[0], stdout)
	default:
		err = shareDeleteOffsets(ctx, adm, pos[0], topics, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitCodeFor(err)
	}
	return exitOK
}

const shareGroupUsage = `Usage: strata share-group <command> [flags]

Share groups (KIP-932) are queues: the members of a group share each
partition, acknowledge records one by one, and get back what a member
releases or leaves unacknowledged past the lock duration.

Commands:
  list [--state STATES]      the share groups and their states (Empty, Stable, Dead)
  describe GROUP [--offsets | --members | --state]
                             --offsets (default): start offset and lag per partition, and with
                             --metrics-url the records in flight and archived;
                             --members: client id, host and assignment per member;
                             --state: state, coordinator, epochs, member count
  reset-offsets GROUP --topic TOPIC[:P,P...] (--to-earliest | --to-latest | --to-datetime TIME | --to-offset N) [--execute]
                             print the plan (old start offset, new start offset, lag before and
                             after); change nothing unless --execute; refused while the group
                             has members. The share-partition state starts anew at the new
                             offset: records below it are skipped, records from it on are
                             delivered again.
  delete GROUP               delete an empty share group and its state
  delete-offsets GROUP --topic TOPIC [--topic TOPIC...]
                             forget the group's state on a topic (the next fetch starts at
                             share.auto.offset.reset); refused while the group has members
  resume GROUP               deliver again to a group the dead-letter flood guard paused
                             (strata.share.dlq.flood.*; describe says when a group is paused)

Every command takes --bootstrap-server host:port (default 127.0.0.1:9092).
`

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shareView is describe's choice of view.
type shareView struct{ members, offsets, state bool }

// shareTopics is a repeatable --topic.
type shareTopics []string

func (l *shareTopics) String() string { return strings.Join(*l, ",") }
func (l *shareTopics) Set(s string) error {
	if s == "" {
		return errors.New("empty topic")
	}
	*l = append(*l, s)
	return nil
}

func shareList(ctx context.Context, adm *kadm.Client, states string, w io.Writer) error {
	var filter []string
	for _, s := range strings.Split(states, ",") {
		if s = strings.TrimSpace(s); s != "" {
			filter = append(filter, s)
		}
	}
	listed, err := adm.ListGroupsByType(ctx, []string{"share"}, filter...)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE")
	for _, g := range listed.Sorted() {
		// A broker without ListGroups v5 ignores the type filter and
		// names no type: those groups are not share groups.
		if g.GroupType != "share" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", g.Group, g.State)
	}
	return tw.Flush()
}

// describeShare describes group with ShareGroupDescribe. ok is false when
// the broker knows no such share group (or cannot describe share groups);
// why says which.
func describeShare(ctx context.Context, adm *kadm.Client, group string) (g kadm.DescribedShareGroup, ok bool, why error, err error) {
	described, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		var se *kadm.ShardErrors
		if errors.As(err, &se) && len(se.Errs) > 0 {
			// The coordinator failed the request (e.g. a broker that
			// does not serve ShareGroupDescribe): no description.
			return g, false, se.Errs[0].Err, nil
		}
		return g, false, nil, err
	}
	g, found := described[group]
	switch {
	case !found:
		return g, false, fmt.Errorf("group %q: no answer", group), nil
	case errors.Is(g.Err, kerr.GroupIDNotFound):
		return g, false, g.Err, nil
	case g.Err != nil:
		return g, false, nil, fmt.Errorf("group %q: %w", group, g.Err)
	case g.GroupState == "Dead":
		return g, false, kerr.GroupIDNotFound, nil
	}
	return g, true, nil, nil
}

func shareDescribeState(ctx context.Context, adm *kadm.Client, group string, w io.Writer) error {
	g, ok, why, err := describeShare(ctx, adm, group)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("share group %q: %w", group, why)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tSTATE\tGROUP-EPOCH\tASSIGNMENT-EPOCH\t#MEMBERS")
	fmt.Fprintf(tw, "%s\t%s:%d (%d)\t%s\t%d\t%d\t%d\n", group, g.Coordinator.Host, g.Coordinator.Port, g.Coordinator.NodeID,
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, len(g.Members))
	return tw.Flush()
}

func shareDescribeMembers(ctx context.Context, adm *kadm.Client, group string, w io.Writer) error {
	g, ok, why, err := describeShare(ctx, adm, group)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("share group %q: %w", group, why)
	}
	fmt.Fprintf(w, "GROUP %s  STATE %s  EPOCH %d  COORDINATOR %d  MEMBERS %d\n\n", group, g.GroupState, g.GroupEpoch, g.Coordinator.NodeID, len(g.Members))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tMEMBER-EPOCH\tASSIGNMENT")
	for _, m := range g.Members {
		n := 0
		var parts []string
		for _, t := range m.Assignment.Sorted() {
			ps := append([]int32(nil), t.Partitions...)
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			var ss []string
			for _, p := range ps {
				ss = append(ss, strconv.Itoa(int(p)))
			}
			n += len(ps)
			parts = append(parts, t.Topic+":"+strings.Join(ss, ","))
		}
		assignment := strings.Join(parts, ";")
		if assignment == "" {
			assignment = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", m.MemberID, orDash(m.ClientHost), orDash(m.ClientID), n, m.MemberEpoch, assignment)
	}
	return tw.Flush()
}

// shareOffsets reads group's share-partition offsets (start offset, leader
// epoch, lag) on every partition where it has state.
func shareOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.ShareOffsets, error) {
	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	d, ok := described[group]
	if !ok {
		return nil, fmt.Errorf("group %q: no answer", group)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("group %q: %w", group, d.Err)
	}
	return d.Offsets, nil
}

func shareDescribeOffsets(ctx context.Context, adm *kadm.Client, group, metricsURL string, w, errw io.Writer) error {
	g, described, why, err := describeShare(ctx, adm, group)
	if err != nil {
		return err
	}
	offsets, err := shareOffsets(ctx, adm, group)
	if err != nil {
		return err
	}
	if !described && len(offsets) == 0 {
		return fmt.Errorf("share group %q: %w", group, why)
	}
	var counts map[shareTP]shareCounts
	if metricsURL != "" {
		if counts, err = scrapeShareCounts(ctx, strings.Split(metricsURL, ","), group); err != nil {
			return err
		}
	}
	if described {
		fmt.Fprintf(w, "GROUP %s  STATE %s  EPOCH %d  COORDINATOR %d  MEMBERS %d\n\n", group, g.GroupState, g.GroupEpoch, g.Coordinator.NodeID, len(g.Members))
	} else {
		// Offsets without a described group: a group whose state was
		// set by reset-offsets before any member joined, or a broker
		// that does not answer ShareGroupDescribe.
		fmt.Fprintf(w, "GROUP %s  STATE - (%v)\n\n", group, why)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "TOPIC\tPARTITION\tSTART-OFFSET\tLAG\tLEADER-EPOCH"
	if counts != nil {
		header += "\tIN-FLIGHT\tARCHIVED"
	}
	fmt.Fprintln(tw, header)
	var total int64
	var failed []error
	for _, o := range offsets.Sorted() {
		if o.Err != nil {
			failed = append(failed, fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err))
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-", o.Topic, o.Partition)
		} else {
			lag := "-"
			if o.Lag >= 0 {
				lag = strconv.FormatInt(o.Lag, 10)
				total += o.Lag
			}
			epoch := "-"
			if o.LeaderEpoch >= 0 {
				epoch = strconv.Itoa(int(o.LeaderEpoch))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s", o.Topic, o.Partition, offsetString(o.StartOffset), lag, epoch)
		}
		if counts != nil {
			c, ok := counts[shareTP{o.Topic, o.Partition}]
			if ok && c.hasInFlight {
				fmt.Fprintf(tw, "\t%d", c.inFlight)
			} else {
				fmt.Fprint(tw, "\t-")
			}
			if ok && c.hasArchived {
				fmt.Fprintf(tw, "\t%d", c.archived)
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(offsets) == 0 {
		fmt.Fprintf(w, "\nShare group %q has no offset information.\n", group)
	} else {
		fmt.Fprintf(w, "\nTOTAL LAG %d\n", total)
	}
	if len(failed) > 0 {
		fmt.Fprintf(errw, "strata: some partitions could not be read:\n")
		return errors.Join(failed...)
	}
	return nil
}

// shareTP names one partition of a topic.
type shareTP struct {
	topic     string
	partition int32
}

// shareCounts are a share partition's counts as a broker's metrics report
// them.
type shareCounts struct {
	inFlight, archived       int64
	hasInFlight, hasArchived bool
}

// scrapeShareCounts reads strata_share_records_in_flight (a gauge the
// partition's leader exports) and strata_share_records_archived_total
// (counters, summed over causes and over brokers: each counts what it
// archived while it led the partition, since it started) for group from
// each Prometheus endpoint in urls.
func scrapeShareCounts(ctx context.Context, urls []string, group string) (map[shareTP]shareCounts, error) {
	out := map[shareTP]shareCounts{}
	for _, u := range urls {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: --metrics-url %q: %v", errConfig, u, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("metrics %s: %w", u, err)
		}
		err = func() error {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("metrics %s: %s", u, resp.Status)
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				name, labels, value, ok := parseMetricLine(sc.Text())
				if !ok || labels["group"] != group {
					continue
				}
				p, err := strconv.ParseInt(labels["partition"], 10, 32)
				if err != nil {
					continue
				}
				k := shareTP{labels["topic"], int32(p)}
				c := out[k]
				switch name {
				case "strata_share_records_in_flight":
					c.inFlight += int64(value)
					c.hasInFlight = true
				case "strata_share_records_archived_total":
					c.archived += int64(value)
					c.hasArchived = true
				default:
					continue
				}
				out[k] = c
			}
			return sc.Err()
		}()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseMetricLine reads one sample of Prometheus' text format,
// `name{k="v",...} value [timestamp]`, label values unescaped (\", \\,
// \n); comments and malformed lines give ok false.
func parseMetricLine(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, 0, false
	}
	name, rest := line[:i], line[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", nil, 0, false
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var b strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				switch c := rest[j]; {
				case c == '\\' && j+1 < len(rest):
					j++
					switch rest[j] {
					case 'n':
						b.WriteByte('\n')
					default:
						b.WriteByte(rest[j])
					}
				case c == '"':
					rest, closed = rest[j+1:], true
				default:
					b.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return "", nil, 0, false
			}
			labels[key] = b.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

type shareResetOptions struct {
	group, topic     string
	earliest, latest bool
	datetime, offset string
	execute          bool
}

func shareReset(ctx context.Context, adm *kadm.Client, o shareResetOptions, w, errw io.Writer) error {
	n := b2i(o.earliest) + b2i(o.latest) + b2i(o.datetime != "") + b2i(o.offset != "")
	if o.topic == "" || n != 1 {
		return fmt.Errorf("%w: reset-offsets needs --topic and exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset", errConfig)
	}
	topic, only, err := parseTopicPartitions(o.topic)
	if err != nil {
		return err
	}
	var target int64
	switch {
	case o.datetime != "":
		target, err = parseResetTime(o.datetime)
	case o.offset != "":
		target, err = strconv.ParseInt(o.offset, 10, 64)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	// Members would keep acknowledging against the old state: refuse, as
	// kafka-share-groups does (the broker refuses too, GROUP_NOT_EMPTY).
	g, described, why, err := describeShare(ctx, adm, o.group)
	if err != nil {
		return err
	}
	switch {
	case described && len(g.Members) > 0:
		return fmt.Errorf("%w: share group %q is %s with %d member(s); stop its consumers first", errGroupActive, o.group, g.GroupState, len(g.Members))
	case !described && !errors.Is(why, kerr.GroupIDNotFound):
		fmt.Fprintf(errw, "strata: cannot describe share group %q (%v); relying on the broker to refuse a reset while it has members\n", o.group, why)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	if _, ok := ends[topic]; !ok {
		return fmt.Errorf("topic %q not found", topic)
	}
	var byTime kadm.ListedOffsets
	if o.datetime != "" {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, target, topic); err != nil {
			return err
		}
	}
	current, err := shareOffsets(ctx, adm, o.group)
	if err != nil {
		return err
	}
	var parts []int32
	for p := range ends[topic] {
		if only == nil || only[p] {
			parts = append(parts, p)
			delete(only, p)
		}
	}
	if len(only) > 0 {
		return fmt.Errorf("topic %q has no partition %v", topic, slices.Sorted(maps.Keys(only)))
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	plan := make(kadm.Offsets)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOLD-OFFSET\tNEW-OFFSET\tLAG-BEFORE\tLAG-AFTER")
	for _, p := range parts {
		start, _ := starts.Lookup(topic, p)
		end, _ := ends.Lookup(topic, p)
		old, lagBefore := int64(-1), "-"
		if c, ok := current[topic][p]; ok && c.Err == nil && c.StartOffset >= 0 {
			old = c.StartOffset
			if c.Lag >= 0 {
				lagBefore = strconv.FormatInt(c.Lag, 10)
			}
		}
		var next int64
		switch {
		case o.earliest:
			next = start.Offset
		case o.latest:
			next = end.Offset
		case o.datetime != "":
			next = end.Offset
			if t, ok := byTime.Lookup(topic, p); ok && t.Err == nil && t.Offset >= 0 {
				next = t.Offset
			}
		default:
			next = target
		}
		next = max(start.Offset, min(next, end.Offset))
		// A reset starts the state anew: every record from next to the
		// end is to be delivered.
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\n", topic, p, offsetString(old), next, lagBefore, end.Offset-next)
		plan.Add(kadm.Offset{Topic: topic, Partition: p, At: next, LeaderEpoch: -1})
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !o.execute {
		fmt.Fprintln(w, "\nDry run: nothing changed. Add --execute to reset these offsets.")
		return nil
	}
	resps, err := adm.AlterShareGroupOffsets(ctx, o.group, plan)
	if err != nil {
		if errors.Is(err, kerr.NonEmptyGroup) {
			return fmt.Errorf("%w: share group %q: %w", errGroupActive, o.group, err)
		}
		return err
	}
	var failed []error
	for _, p := range parts {
		if e, ok := resps.Lookup(topic, p); !ok {
			failed = append(failed, fmt.Errorf("%s[%d]: no answer", topic, p))
		} else if e != nil {
			failed = append(failed, fmt.Errorf("%s[%d]: %w", topic, p, e))
		}
	}
	if err := errors.Join(failed...); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	fmt.Fprintf(w, "\nReset %d start offset(s) for share group %s.\n", len(parts), o.group)
	return nil
}

// parseTopicPartitions reads kafka-share-groups' TOPIC or TOPIC:P,P,...;
// only is nil for every partition.
func parseTopicPartitions(s string) (topic string, only map[int32]bool, err error) {
	topic, list, has := strings.Cut(s, ":")
	if topic == "" {
		return "", nil, fmt.Errorf("%w: --topic %q: no topic name", errConfig, s)
	}
	if !has {
		return topic, nil, nil
	}
	only = map[int32]bool{}
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || p < 0 {
			return "", nil, fmt.Errorf("%w: --topic %q: bad partition %q", errConfig, s, f)
		}
		only[int32(p)] = true
	}
	return topic, only, nil
}

func shareDelete(ctx context.Context, adm *kadm.Client, group string, w io.Writer) error {
	// Delete only a share group, and only an empty one, as
	// kafka-share-groups checks before it asks.
	listed, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return err
	}
	l, ok := listed[group]
	switch {
	case !ok || l.GroupType != "share":
		return fmt.Errorf("group %q is not a share group: %w", group, kerr.GroupIDNotFound)
	case l.State == "Dead":
		return fmt.Errorf("share group %q is Dead: %w", group, kerr.GroupIDNotFound)
	case l.State != "Empty":
		return fmt.Errorf("%w: share group %q is %s; stop its consumers first", errGroupActive, group, l.State)
	}
	resps, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		return err
	}
	r, ok := resps[group]
	if !ok {
		return fmt.Errorf("group %q: no answer", group)
	}
	if r.Err != nil {
		return fmt.Errorf("share group %q: %w", group, errMsg(r.Err, r.ErrMessage))
	}
	fmt.Fprintf(w, "Deleted share group %s.\n", group)
	return nil
}

func shareDeleteOffsets(ctx context.Context, adm *kadm.Client, group string, topics []string, w io.Writer) error {
	// The broker refuses while the group has members (NON_EMPTY_GROUP);
	// check first as reset-offsets does, for a broker that would not.
	g, described, _, err := describeShare(ctx, adm, group)
	if err != nil {
		return err
	}
	if described && len(g.Members) > 0 {
		return fmt.Errorf("%w: share group %q is %s with %d member(s); stop its consumers first", errGroupActive, group, g.GroupState, len(g.Members))
	}
	resps, err := adm.DeleteShareGroupOffsets(ctx, group, topics...)
	if err != nil {
		if errors.Is(err, kerr.NonEmptyGroup) {
			return fmt.Errorf("%w: share group %q: %w", errGroupActive, group, err)
		}
		return err
	}
	sorted := append([]string(nil), topics...)
	sort.Strings(sorted)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tSTATUS")
	var failed []error
	for _, t := range sorted {
		e, ok := resps.Lookup(t)
		switch {
		case !ok:
			e = errors.New("no answer")
			fallthrough
		case e != nil:
			failed = append(failed, fmt.Errorf("%s: %w", t, e))
			fmt.Fprintf(tw, "%s\tError: %v\n", t, e)
		default:
			fmt.Fprintf(tw, "%s\tSuccessful\n", t)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(failed...)
}
