package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/strata-io/strata/bench"
)

// benchCommand runs `strata bench ...` (package bench), plus one
// subcommand that needs this package: serve-profiled runs `strata serve`
// in this process under a CPU profile, which bench compare uses
// (--cpuprofile-dir) to show where the broker's time goes.
func benchCommand(args, environ []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "serve-profiled" {
		return serveProfiled(ctx, stop, args[1:], environ, stdout, stderr)
	}
	return bench.Main(ctx, args, stdout, stderr)
}

// serveProfiled is `strata bench serve-profiled --cpuprofile FILE serve
// [serve flags]`: the profile covers the broker's whole life and is
// written when it stops (SIGTERM).
func serveProfiled(ctx context.Context, stop func(), args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench serve-profiled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("cpuprofile", "", "write the CPU profile to `file`")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if *path == "" || fs.NArg() == 0 || fs.Arg(0) != "serve" {
		fmt.Fprintln(stderr, "usage: strata bench serve-profiled --cpuprofile FILE serve [serve flags]")
		return exitConfig
	}
	f, err := os.Create(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	code := serveCommand(ctx, stop, fs.Args()[1:], environ, stdout, stderr)
	pprof.StopCPUProfile()
	return code
}
