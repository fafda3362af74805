package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"

	"github.com/twmb/franz-go/pkg/kfake"
)

// readyPrefix starts the line a broker child prints on stdout once it
// accepts connections; compare reads the address from it.
const readyPrefix = "listening "

// nullServerMain runs the null broker until ctx is done (compare runs it
// as a child process so that its CPU time and RSS are its own).
func nullServerMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench null-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`host:port` to listen on")
	profile := fs.String("cpuprofile", "", "write a CPU profile to `file` (until the server stops)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("%w: %v", ErrRun, err)
		}
		defer pprof.StopCPUProfile()
	}
	b, err := NewNullBroker(*listen, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- b.Serve() }()
	fmt.Fprintln(stdout, readyPrefix+b.Addr())
	select {
	case <-ctx.Done():
		return b.Close()
	case err := <-errc:
		b.Close()
		return err
	}
}

// kfakeServerMain runs franz-go's kfake (one broker) until ctx is done,
// in memory or, with --data-dir, persisting to that directory.
func kfakeServerMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench kfake-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`host:port` to listen on")
	dataDir := fs.String("data-dir", "", "persist to this directory (default: in memory)")
	syncWrites := fs.Bool("sync-writes", false, "fsync every batch (kfake.SyncWrites)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *listen) }),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("%w: kfake: %v", ErrBroker, err)
	}
	fmt.Fprintln(stdout, readyPrefix+c.ListenAddrs()[0])
	<-ctx.Done()
	c.Close()
	return nil
}
