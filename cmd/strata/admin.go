package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What the admin subcommands (topic, group, broker) share: their
// connection flags, interspersed positional arguments, and the report of
// per-resource answers.

// adminFlags are the connection flags of every admin subcommand.
type adminFlags struct {
	bootstrap string
	timeout   time.Duration
	// opts are further client options (the console's actions: the
	// broker's inter-broker identity); not a flag.
	opts []kgo.Opt
}

func (a *adminFlags) register(fs *flag.FlagSet, environ []string) {
	fs.StringVar(&a.bootstrap, "bootstrap-server", envOr(environ, "STRATA_BOOTSTRAP_SERVER", "127.0.0.1:9092"),
		"broker `host:port` list, comma-separated (env STRATA_BOOTSTRAP_SERVER)")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "give up after this long")
}

// connect returns an admin client and a context bounded by --timeout;
// closing releases both.
func (a *adminFlags) connect() (adm *kadm.Client, ctx context.Context, closing func(), err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(a.bootstrap, ",")...), kgo.RetryTimeout(a.timeout)}, a.opts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	return kadm.NewClient(cl), ctx, func() { cancel(); cl.Close() }, nil
}

// parseInterspersed parses args with fs, letting flags follow positional
// arguments as kafka-topics and kafka-consumer-groups allow, and returns
// the positional ones. The error is fs.Parse's (flag.ErrHelp for -h).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseExit is the exit code of a failed parse: 0 for -h (the usage is
// printed), exitConfig otherwise.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitConfig
}

// answer is a broker's answer for one named resource.
type answer struct {
	err error
	msg string // the answer's ErrorMessage
}

// reportAnswers calls done for each name answered without error and
// returns the failures -- an error, or no answer at all -- each naming its
// resource. accept, when non-nil, lets a caller take some errors as
// success without a report (--if-not-exists).
func reportAnswers(names []string, get func(name string) (answer, bool), accept func(error) bool, done func(name string)) error {
	var failed []error
	for _, n := range names {
		a, ok := get(n)
		switch {
		case !ok:
			failed = append(failed, fmt.Errorf("%s: no answer", n))
		case a.err != nil && accept != nil && accept(a.err):
		case a.err != nil:
			failed = append(failed, fmt.Errorf("%s: %w", n, errMsg(a.err, a.msg)))
		default:
			done(n)
		}
	}
	return errors.Join(failed...)
}
