package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dev-cluster starts a local cluster of plain strata processes on
// loopback (in the manner of rpk container start -n 3): broker i has node
// id i, Kafka listener 127.0.0.1:(port+i-1), replication listener
// 127.0.0.1:(port+100+i-1), data in DIR/broker-i and its log in
// DIR/broker-i.log; all are voters of the metadata quorum. It prints the
// bootstrap addresses once every broker answers, and on SIGINT/SIGTERM
// stops the brokers with SIGTERM (SIGKILL after 30 s) and exits.

const (
	maxDevBrokers       = 9
	devReadyTimeout     = 60 * time.Second
	devStopTimeout      = 30 * time.Second
	devReplicationShift = 100
)

func devClusterCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev-cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("brokers", 3, "number of brokers (1-9)")
	dir := fs.String("dir", "./strata-dev-cluster", "folder holding every broker's data and log")
	port := fs.Int("port", 19092, "Kafka port of broker 1; broker i listens on port+i-1, its replication listener on port+100+i-1")
	bin := fs.String("binary", "", "strata binary to run (default: this one)")
	var sets multiFlag
	fs.Var(&sets, "set", "name=value passed to every broker's serve (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	if *n < 1 || *n > maxDevBrokers {
		fmt.Fprintf(stderr, "dev-cluster: --brokers %d: must be 1..%d\n", *n, maxDevBrokers)
		return exitConfig
	}
	if *port < 1 || *port+devReplicationShift+*n > 65535 {
		fmt.Fprintf(stderr, "dev-cluster: --port %d out of range\n", *port)
		return exitConfig
	}
	exe := *bin
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			fmt.Fprintln(stderr, "dev-cluster:", err)
			return exitError
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "dev-cluster:", err)
		return exitError
	}
	var voters, bootstrap []string
	for i := 1; i <= *n; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, *port+devReplicationShift+i-1))
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", *port+i-1))
	}
	type proc struct {
		cmd  *exec.Cmd
		done chan struct{}
		log  *os.File
	}
	procs := make([]*proc, 0, *n)
	stopAll := func() int {
		code := exitOK
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for i, p := range procs {
			select {
			case <-p.done:
			case <-time.After(devStopTimeout):
				fmt.Fprintf(stderr, "dev-cluster: broker %d did not stop within %v; killing it\n", i+1, devStopTimeout)
				p.cmd.Process.Kill()
				<-p.done
				code = exitError
			}
			p.log.Close()
		}
		return code
	}
	for i := 1; i <= *n; i++ {
		logPath := filepath.Join(*dir, fmt.Sprintf("broker-%d.log", i))
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "dev-cluster:", err)
			stopAll()
			return exitError
		}
		cargs := []string{"serve",
			"--set", "node.id=" + strconv.Itoa(i),
			"--set", fmt.Sprintf("listeners=PLAINTEXT://%s", bootstrap[i-1]),
			"--set", "log.dirs=" + filepath.Join(*dir, fmt.Sprintf("broker-%d", i)),
			"--set", "controller.quorum.voters=" + strings.Join(voters, ","),
			// A local cluster is for trying replication: topics get a
			// replica on every broker (up to 3) unless --set says otherwise
			// (a later --set of the same name wins).
			"--set", "default.replication.factor=" + strconv.Itoa(min(*n, 3)),
		}
		for _, s := range sets {
			cargs = append(cargs, "--set", s)
		}
		cmd := exec.Command(exe, cargs...)
		cmd.Stdout, cmd.Stderr = lf, lf
		// Own process group: a Ctrl-C in the terminal reaches dev-cluster
		// only, which then stops the brokers in order.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(stderr, "dev-cluster:", err)
			lf.Close()
			stopAll()
			return exitError
		}
		p := &proc{cmd: cmd, done: make(chan struct{}), log: lf}
		go func() { cmd.Wait(); close(p.done) }()
		procs = append(procs, p)
	}
	deadline := time.Now().Add(devReadyTimeout)
	for i, addr := range bootstrap {
		for {
			if kafkaAnswers(addr) {
				break
			}
			select {
			case <-procs[i].done:
				fmt.Fprintf(stderr, "dev-cluster: broker %d exited during start-up; see %s\n", i+1, procs[i].log.Name())
				stopAll()
				return exitError
			case <-ctx.Done():
				return stopAll()
			default:
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(stderr, "dev-cluster: broker %d not ready after %v; see %s\n", i+1, devReadyTimeout, procs[i].log.Name())
				stopAll()
				return exitError
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	fmt.Fprintf(stdout, "strata dev cluster: %d brokers, data in %s\n", *n, *dir)
	fmt.Fprintf(stdout, "bootstrap: %s\n", strings.Join(bootstrap, ","))
	fmt.Fprintln(stdout, "Ctrl-C stops it.")
	exited := make(chan int, len(procs))
	for i, p := range procs {
		go func(i int, p *proc) { <-p.done; exited <- i }(i, p)
	}
	select {
	case <-ctx.Done():
	case i := <-exited:
		fmt.Fprintf(stderr, "dev-cluster: broker %d exited; stopping the others (see %s)\n", i+1, procs[i].log.Name())
		stopAll()
		return exitError
	}
	fmt.Fprintln(stdout, "stopping")
	return stopAll()
}

// kafkaAnswers reports whether addr answers an ApiVersions v0 request: the
// listener is bound before the broker has joined the quorum, so an open
// port alone does not mean ready.
func kafkaAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	// size, api key 18, version 0, correlation id 1, client id null.
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		return false
	}
	var hdr [8]byte
	_, err = io.ReadFull(c, hdr[:])
	return err == nil && hdr[7] == 1
}
