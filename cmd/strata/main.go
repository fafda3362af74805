// Command strata is the Strata broker: a Kafka-protocol-compatible log
// server. See doc.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version from the build info is used.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1 // a runtime failure (storage, listener)
	exitConfig = 2 // bad command line or configuration
	// exitShutdownTimeout: a shutdown did not finish within
	// strata.shutdown.timeout.ms and was cut short (shutdown.go).
	exitShutdownTimeout = 3
)

func run(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitConfig
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "version", "--version":
		fmt.Fprintf(stdout, "strata %s (%s %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return serveCommand(ctx, stop, args[1:], environ, stdout, stderr)
	case "dev-cluster":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return devClusterCommand(ctx, args[1:], stdout, stderr)
	case "debug":
		return debugCommand(args[1:], stdout, stderr)
	case "group":
		return groupCommand(args[1:], environ, stdout, stderr)
	case "share-group":
		return shareGroupCommand(args[1:], environ, stdout, stderr)
	case "dlq":
		return dlqCommand(args[1:], environ, stdout, stderr)
	case "topic":
		return topicCommand(args[1:], environ, stdout, stderr)
	case "txn":
		return txnCommand(args[1:], environ, stdout, stderr)
	case "broker":
		return brokerCommand(args[1:], environ, stdout, stderr)
	case "bench":
		return benchCommand(args[1:], environ, stdout, stderr)
	case "certs":
		return certsCommand(args[1:], stdout, stderr)
	case "user":
		return userCommand(args[1:], environ, stdout, stderr)
	case "acl":
		return aclCommand(args[1:], environ, stdout, stderr)
	case "quota":
		return quotaCommand(args[1:], environ, stdout, stderr)
	}
	fmt.Fprintf(stderr, "strata: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitConfig
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: strata <command> [arguments]

Commands:
  serve                      run a broker (strata serve --help for settings)
  version                    print the version
  dev-cluster [--brokers 3]  run a local cluster of strata processes on loopback (Ctrl-C stops it)
  dev-cluster restart|kill|stop N, status
                             restart, kill or stop a broker of the running dev-cluster, or list them
  debug dump-segment FILE    print the record batch headers of a segment .log file
  topic create|list|describe|alter-config|add-partitions|delete
                             topics and their configs, applied live (strata topic help)
  broker describe-config|alter-config
                             dynamic broker configs, applied live (strata broker help)
  group list|describe|reset-offsets
                             consumer groups: list, lag per partition, replay by offset reset (strata group help)
  share-group list|describe|reset-offsets|delete|delete-offsets|resume
                             share groups (queues): start offset, lag, members, replay (strata share-group help)
  dlq list|inspect|redrive   share groups' dead letters: depth, age, reasons; re-publish them (strata dlq help)
  txn list|describe          transactions: state, producer, partitions (strata txn help)
  bench produce|consume|e2e|workload|compare
                             load tool for any Kafka-compatible broker (strata bench help)
  certs ca|issue             a cluster CA and the certificates it signs, as PEM (strata certs help)
  user set|delete|list       SCRAM users, salted and replicated (strata user help)
  acl add|list|remove        ACLs with kafka-acls.sh's flags, replicated (strata acl help)
  quota set|remove|list      client quotas: byte rates, request time, mutations per user/client ID (strata quota help)

`)
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// exitCodeFor maps an error to the process exit code.
func exitCodeFor(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errConfig):
		return exitConfig
	}
	return exitError
}
