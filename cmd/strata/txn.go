package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const txnUsage = `Usage: strata txn <command> [flags]

Commands:
  list [--state S,...]       list transactional IDs: producer ID, state, coordinator
  describe ID                state, producer ID and epoch, timeout, start time and
                             partitions of one transactional ID, plus the open
                             transaction's first offset per partition (DescribeProducers)

Every command takes --bootstrap-server host:port (default 127.0.0.1:9092).
`

// txnCommand runs `strata txn list|describe`, an admin client (kadm) over
// ListTransactions, DescribeTransactions and DescribeProducers: it works
// against any Kafka-compatible broker.
func txnCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, txnUsage)
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	switch args[0] {
	case "list", "describe":
	default:
		fmt.Fprintf(stderr, "strata txn: unknown command %q\n\n%s", args[0], txnUsage)
		return exitConfig
	}
	fs := flag.NewFlagSet("txn "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs, environ)
	states := fs.String("state", "", "list only these `states` (comma-separated: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	want := map[string]int{"list": 0, "describe": 1}[args[0]]
	if len(pos) != want {
		fmt.Fprintf(stderr, "strata txn %s: want %d argument(s), got %d\n\n%s", args[0], want, len(pos), txnUsage)
		return exitConfig
	}
	adm, ctx, closing, err := af.connect()
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitConfig
	}
	defer closing()
	if args[0] == "list" {
		var filter []string
		if *states != "" {
			filter = strings.Split(*states, ",")
		}
		return txnList(ctx, adm, filter, stdout, stderr)
	}
	return txnDescribe(ctx, adm, pos[0], stdout, stderr)
}

func txnList(ctx context.Context, adm *kadm.Client, states []string, stdout, stderr io.Writer) int {
	ls, err := adm.ListTransactions(ctx, nil, states)
	if err != nil && len(ls) == 0 {
		fmt.Fprintf(stderr, "strata txn list: %v\n", err)
		return exitError
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE\tCOORDINATOR")
	for _, t := range ls.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", t.TxnID, t.ProducerID, t.State, t.Coordinator)
	}
	tw.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "strata txn list: some brokers did not answer: %v\n", err)
		return exitError
	}
	return exitOK
}

func txnDescribe(ctx context.Context, adm *kadm.Client, id string, stdout, stderr io.Writer) int {
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "strata txn describe: %v\n", err)
		return exitError
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		fmt.Fprintf(stderr, "strata txn describe %s: %v\n", id, d.Err)
		return exitError
	}
	start := "-"
	if d.StartTimestamp >= 0 {
		start = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(stdout, "transactional id: %s\nstate:            %s\nproducer:         id %d, epoch %d\ntimeout:          %v\nstarted:          %s\ncoordinator:      %d\n",
		d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, time.Duration(d.TimeoutMillis)*time.Millisecond, start, d.Coordinator)
	if len(d.Topics) == 0 {
		return exitOK
	}
	// The open transaction's first offset per partition, from the
	// partitions' producer state.
	first := map[string]map[int32]int64{}
	if dp, err := adm.DescribeProducers(ctx, d.Topics); err == nil {
		dp.EachProducer(func(p kadm.DescribedProducer) {
			if p.ProducerID == d.ProducerID && p.CurrentTxnStartOffset >= 0 {
				if first[p.Topic] == nil {
					first[p.Topic] = map[int32]int64{}
				}
				first[p.Topic][p.Partition] = p.CurrentTxnStartOffset
			}
		})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tTXN-START-OFFSET")
	topics := d.Topics.Topics()
	sort.Strings(topics)
	for _, t := range topics {
		ps := make([]int32, 0, len(d.Topics[t]))
		for p := range d.Topics[t] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			off := "-"
			if o, ok := first[t][p]; ok {
				off = fmt.Sprint(o)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", t, p, off)
		}
	}
	tw.Flush()
	return exitOK
}
