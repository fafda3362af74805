package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
//
// It is also for trying failover by hand: a broker that exits (killed,
// crashed, stopped) is reported and the others keep running; `strata
// dev-cluster restart N` (or `kill N`, `stop N`, `status`), run in another
// terminal, talks to the running dev-cluster through the unix socket
// DIR/control.sock, and the same commands can be typed on dev-cluster's
// standard input.

const (
	maxDevBrokers       = 9
	devReadyTimeout     = 60 * time.Second
	devStopTimeout      = 30 * time.Second
	devReplicationShift = 100
	// devControlSocket is the control socket's name in the data folder.
	devControlSocket = "control.sock"
)

// devControlCommands are the commands of the control socket and of the
// standard input: name -> whether it takes a broker number.
var devControlCommands = map[string]bool{"restart": true, "kill": true, "stop": true, "status": false}

func devClusterCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if _, ok := devControlCommands[args[0]]; ok {
			return devControlClient(args, stdout, stderr)
		}
	}
	opts, code := parseDevClusterFlags(args, stderr)
	if opts == nil {
		return code
	}
	if err := os.MkdirAll(opts.dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "dev-cluster:", err)
		return exitError
	}
	out := &devOutput{stdout: stdout, stderr: stderr}
	// The control socket first: a second dev-cluster on the same folder
	// would share the brokers' data directories.
	ctl, err := listenDevControl(opts.dir)
	if err != nil {
		fmt.Fprintln(stderr, "dev-cluster:", err)
		return exitError
	}
	if ctl != nil {
		defer ctl.Close()
	}
	dc, bootstrap := planDevCluster(opts, out)
	if code, ok := dc.startAll(ctx); !ok {
		return code
	}
	if opts.controllers > 0 {
		out.printf(false, "strata dev cluster: %d controllers (nodes 1-%d, no Kafka listener), %d brokers, data in %s\n", opts.controllers, opts.controllers, opts.brokers, opts.dir)
	} else {
		out.printf(false, "strata dev cluster: %d brokers, data in %s\n", opts.brokers, opts.dir)
	}
	out.printf(false, "bootstrap: %s\n", strings.Join(bootstrap, ","))
	if ctl != nil {
		out.printf(false, "control: strata dev-cluster restart|kill|stop N --dir %s (or type the command here; status lists the brokers)\n", opts.dir)
	}
	out.printf(false, "Ctrl-C stops it.\n")
	return dc.serve(ctx, ctl, out)
}

// devClusterOptions are dev-cluster's flags, checked.
type devClusterOptions struct {
	brokers, controllers, port int
	dir, exe                   string
	sets                       []string
}

// parseDevClusterFlags parses and checks dev-cluster's flags; nil with
// the exit code when they do not hold (or --help).
func parseDevClusterFlags(args []string, stderr io.Writer) (*devClusterOptions, int) {
	fs := flag.NewFlagSet("dev-cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("brokers", 3, "number of brokers (1-9)")
	nc := fs.Int("controllers", 0, "0: the brokers are the controllers (each broker,controller); K (1-9): K controller-only nodes 1..K and the brokers broker-only nodes K+1..K+brokers (process.roles)")
	dir := fs.String("dir", "./strata-dev-cluster", "folder holding every broker's data and log")
	port := fs.Int("port", 19092, "Kafka port of broker 1; broker i listens on port+i-1, its replication listener on port+100+i-1")
	bin := fs.String("binary", "", "strata binary to run (default: this one)")
	var sets multiFlag
	fs.Var(&sets, "set", "name=value passed to every broker's serve (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: strata dev-cluster [flags]        run a local cluster")
		fmt.Fprintln(stderr, "       strata dev-cluster restart|kill|stop N [--dir DIR]")
		fmt.Fprintln(stderr, "       strata dev-cluster status [--dir DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitConfig
	}
	if *n < 1 || *n > maxDevBrokers {
		fmt.Fprintf(stderr, "dev-cluster: --brokers %d: must be 1..%d\n", *n, maxDevBrokers)
		return nil, exitConfig
	}
	if *nc < 0 || *nc > maxDevBrokers {
		fmt.Fprintf(stderr, "dev-cluster: --controllers %d: must be 0..%d\n", *nc, maxDevBrokers)
		return nil, exitConfig
	}
	if *port < 1 || *port+devReplicationShift+*nc+*n > 65535 {
		fmt.Fprintf(stderr, "dev-cluster: --port %d out of range\n", *port)
		return nil, exitConfig
	}
	exe := *bin
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			fmt.Fprintln(stderr, "dev-cluster:", err)
			return nil, exitError
		}
	}
	return &devClusterOptions{brokers: *n, controllers: *nc, port: *port, dir: *dir, exe: exe, sets: sets}, exitOK
}

// planDevCluster lays the nodes out and builds each one's serve
// arguments; it returns the cluster (nothing started) and the Kafka
// bootstrap addresses. Node i: Kafka port port+i-1, replication port
// port+100+i-1. With --controllers K, nodes 1..K are controller-only and
// K+1..K+n broker-only (process.roles; README "Roles").
func planDevCluster(o *devClusterOptions, out *devOutput) (*devCluster, []string) {
	nodes := o.brokers + o.controllers
	var voters, bootstrap, addrs []string
	for i := 1; i <= nodes; i++ {
		rep := fmt.Sprintf("127.0.0.1:%d", o.port+devReplicationShift+i-1)
		if o.controllers == 0 || i <= o.controllers {
			voters = append(voters, fmt.Sprintf("%d@%s", i, rep))
		}
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", o.port+i-1))
		if i > o.controllers {
			bootstrap = append(bootstrap, addrs[i-1])
		}
	}
	dc := &devCluster{exe: o.exe, out: out, exits: make(chan devExit, nodes)}
	for i := 1; i <= nodes; i++ {
		cargs := []string{"serve",
			"--set", "node.id=" + strconv.Itoa(i),
			"--set", fmt.Sprintf("listeners=PLAINTEXT://%s", addrs[i-1]),
			"--set", "log.dirs=" + filepath.Join(o.dir, fmt.Sprintf("broker-%d", i)),
			"--set", "controller.quorum.voters=" + strings.Join(voters, ","),
			// A local cluster is for trying replication: topics get a
			// replica on every broker (up to 3) unless --set says otherwise
			// (a later --set of the same name wins).
			"--set", "default.replication.factor=" + strconv.Itoa(min(o.brokers, 3)),
		}
		rep := fmt.Sprintf("127.0.0.1:%d", o.port+devReplicationShift+i-1)
		controller := o.controllers > 0 && i <= o.controllers
		switch {
		case controller:
			// Plaintext on loopback: the controllers admit the broker-only
			// nodes joining (a setting, as a node's ID is only its claim).
			cargs = append(cargs, "--set", "process.roles=controller", "--set", "replication.plaintext.allow.nonloopback=true")
		case o.controllers > 0:
			cargs = append(cargs, "--set", "process.roles=broker", "--set", "replication.listener="+rep)
		}
		for _, s := range o.sets {
			cargs = append(cargs, "--set", s)
		}
		dc.brokers = append(dc.brokers, &devBroker{id: i, addr: addrs[i-1], rep: rep, controller: controller, args: cargs,
			logPath: filepath.Join(o.dir, fmt.Sprintf("broker-%d.log", i))})
	}
	return dc, bootstrap
}

// startAll starts every node and waits until each is ready; on failure
// (a node exits, the deadline passes, ctx ends) it stops them all and
// returns the exit code with ok false.
func (dc *devCluster) startAll(ctx context.Context) (code int, ok bool) {
	stderr := dc.out.stderr
	for _, b := range dc.brokers {
		if err := dc.start(b); err != nil {
			fmt.Fprintln(stderr, "dev-cluster:", err)
			dc.stopAll()
			return exitError, false
		}
	}
	deadline := time.Now().Add(devReadyTimeout)
	for _, b := range dc.brokers {
		for !b.ready() {
			select {
			case e := <-dc.exits:
				fmt.Fprintf(stderr, "dev-cluster: broker %d exited during start-up (%s); see %s\n", e.b.id, e.b.lastExit(), e.b.logPath)
				dc.stopAll()
				return exitError, false
			case <-ctx.Done():
				return dc.stopAll(), false
			default:
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(stderr, "dev-cluster: broker %d not ready after %v; see %s\n", b.id, devReadyTimeout, b.logPath)
				dc.stopAll()
				return exitError, false
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return exitOK, true
}

// serve runs the cluster until ctx ends: restarts and status requests
// from the control socket and the standard input, exits reported.
func (dc *devCluster) serve(ctx context.Context, ctl net.Listener, out *devOutput) int {
	reqs := make(chan devRequest)
	// A dev-cluster in the background reading its terminal would be
	// stopped by SIGTTIN: ignored, the read fails and only the reading
	// ends.
	signal.Ignore(syscall.SIGTTIN)
	if ctl != nil {
		go serveDevControl(ctl, reqs)
	}
	go readDevStdin(os.Stdin, reqs, out)
	for {
		select {
		case <-ctx.Done():
			out.printf(false, "stopping\n")
			return dc.stopAll()
		case e := <-dc.exits:
			dc.exited(e)
		case r := <-reqs:
			dc.handle(r)
		}
	}
}

// devOutput serialises dev-cluster's messages (the main loop, the
// readiness watchers and the replies to the standard input share it).
type devOutput struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func (o *devOutput) printf(toErr bool, format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.stdout
	if toErr {
		w = o.stderr
	}
	fmt.Fprintf(w, format, a...)
}

// devBroker is one broker of a dev-cluster; its fields are used by the
// main loop only.
type devBroker struct {
	id   int
	addr string
	rep  string // replication listener
	// controller: a controller-only node (--controllers), ready once its
	// replication listener accepts (it has no Kafka listener).
	controller bool
	args       []string
	logPath    string
	proc       *devProc // the current or last process; nil before the first start
	// expected: the current process was told to stop (restart, stop,
	// kill, shutdown), so its exit is no news.
	expected bool
}

// devProc is one run of a broker.
type devProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's; set before done is closed
	end  time.Time     // likewise
}

func (b *devBroker) running() bool {
	if b.proc == nil {
		return false
	}
	select {
	case <-b.proc.done:
		return false
	default:
		return true
	}
}

// lastExit says how b's last process ended (it must have).
func (b *devBroker) lastExit() string {
	how := "exit status 0"
	if b.proc.err != nil {
		how = b.proc.err.Error()
	}
	return fmt.Sprintf("%s at %s", how, b.proc.end.Format("15:04:05"))
}

type devExit struct {
	b *devBroker
	p *devProc
}

type devCluster struct {
	exe     string
	out     *devOutput
	brokers []*devBroker
	exits   chan devExit
}

// start runs b's process; its exit arrives on dc.exits.
func (dc *devCluster) start(b *devBroker) error {
	lf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(dc.exe, b.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Own process group: a Ctrl-C in the terminal reaches dev-cluster
	// only, which then stops the brokers in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	p := &devProc{cmd: cmd, done: make(chan struct{})}
	b.proc, b.expected = p, false
	go func() {
		p.err = cmd.Wait()
		p.end = time.Now()
		lf.Close()
		close(p.done)
		dc.exits <- devExit{b: b, p: p}
	}()
	return nil
}

// exited reports a broker's exit (unless it was asked for): the others
// keep running.
func (dc *devCluster) exited(e devExit) {
	if e.p != e.b.proc || e.b.expected {
		return // asked for, or an earlier process of a broker since restarted
	}
	dc.out.printf(true, "dev-cluster: broker %d exited (%s); the others keep running. `strata dev-cluster restart %d` (or typing `restart %d` here) starts it again; its log: %s\n",
		e.b.id, e.b.lastExit(), e.b.id, e.b.id, e.b.logPath)
}

// stop ends b's process (SIGTERM, SIGKILL after devStopTimeout, or
// SIGKILL at once) and waits for it; it reports false if it had to kill
// a process that ignored SIGTERM.
func (dc *devCluster) stop(b *devBroker, kill bool) bool {
	if !b.running() {
		return true
	}
	b.expected = true
	p := b.proc
	if kill {
		p.cmd.Process.Kill()
		<-p.done
		return true
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(devStopTimeout):
		dc.out.printf(true, "dev-cluster: broker %d did not stop within %v; killing it\n", b.id, devStopTimeout)
		p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

func (dc *devCluster) stopAll() int {
	code := exitOK
	for _, b := range dc.brokers {
		if b.running() {
			b.expected = true
			b.proc.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, b := range dc.brokers {
		if !dc.stop(b, false) {
			code = exitError
		}
	}
	return code
}

// devRequest is one control command; its reply lines go to reply, which
// is closed after the last one.
type devRequest struct {
	verb  string
	id    int
	reply chan<- string
}

// handle runs a command in the main loop; a restart's wait for the
// broker to answer runs beside it, so exits keep being reported.
func (dc *devCluster) handle(r devRequest) {
	if r.verb == "status" {
		for _, b := range dc.brokers {
			switch {
			case b.running():
				r.reply <- fmt.Sprintf("broker %d: running, pid %d, %s", b.id, b.proc.cmd.Process.Pid, b.addr)
			case b.proc == nil:
				r.reply <- fmt.Sprintf("broker %d: not started", b.id)
			default:
				r.reply <- fmt.Sprintf("broker %d: exited (%s)", b.id, b.lastExit())
			}
		}
		r.reply <- "ok"
		close(r.reply)
		return
	}
	if r.id < 1 || r.id > len(dc.brokers) {
		r.reply <- fmt.Sprintf("error: no broker %d (1..%d)", r.id, len(dc.brokers))
		close(r.reply)
		return
	}
	b := dc.brokers[r.id-1]
	switch r.verb {
	case "kill", "stop":
		if !b.running() {
			r.reply <- fmt.Sprintf("broker %d is not running", b.id)
		} else {
			pid := b.proc.cmd.Process.Pid
			dc.stop(b, r.verb == "kill")
			r.reply <- fmt.Sprintf("broker %d (pid %d): %s", b.id, pid, b.lastExit())
		}
		r.reply <- "ok"
		close(r.reply)
	case "restart":
		if b.running() {
			dc.stop(b, false)
			r.reply <- fmt.Sprintf("broker %d stopped (%s)", b.id, b.lastExit())
		}
		if err := dc.start(b); err != nil {
			r.reply <- fmt.Sprintf("error: starting broker %d: %v", b.id, err)
			close(r.reply)
			return
		}
		r.reply <- fmt.Sprintf("broker %d started, pid %d", b.id, b.proc.cmd.Process.Pid)
		go func(addr string, done chan struct{}) {
			defer close(r.reply)
			deadline := time.Now().Add(devReadyTimeout)
			for !b.ready() {
				select {
				case <-done:
					r.reply <- fmt.Sprintf("error: broker %d exited before it was ready; see %s", b.id, b.logPath)
					return
				default:
				}
				if time.Now().After(deadline) {
					r.reply <- fmt.Sprintf("error: broker %d not ready after %v; see %s", b.id, devReadyTimeout, b.logPath)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			r.reply <- fmt.Sprintf("broker %d ready at %s", b.id, addr)
			r.reply <- "ok"
		}(b.addr, b.proc.done)
	}
}

// devShortCommands are the short forms of the typed commands.
var devShortCommands = map[string]string{"r": "restart", "k": "kill", "s": "status"}

// parseDevCommand parses "restart 2", "status", ... ("r 2", "k 2", "s"
// work too).
func parseDevCommand(line string) (verb string, id int, err error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", 0, errors.New("empty command")
	}
	verb = f[0]
	if long, ok := devShortCommands[verb]; ok {
		verb = long
	}
	needsID, ok := devControlCommands[verb]
	if !ok {
		return "", 0, fmt.Errorf("unknown command %q (restart N, kill N, stop N, status)", f[0])
	}
	if !needsID {
		if len(f) != 1 {
			return "", 0, fmt.Errorf("%s takes no argument", verb)
		}
		return verb, 0, nil
	}
	if len(f) != 2 {
		return "", 0, fmt.Errorf("%s needs a broker number", verb)
	}
	if id, err = strconv.Atoi(f[1]); err != nil {
		return "", 0, fmt.Errorf("%s %q: not a broker number", verb, f[1])
	}
	return verb, id, nil
}

// listenDevControl opens DIR/control.sock. A socket file that nobody
// answers on is a leftover of a dev-cluster that died and is replaced;
// one that answers means a dev-cluster runs on DIR already. A path too
// long for a unix socket leaves the cluster without control (nil).
func listenDevControl(dir string) (net.Listener, error) {
	path := filepath.Join(dir, devControlSocket)
	if len(path) >= 104 {
		return nil, nil
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("a dev-cluster already runs on %s (its control socket %s answers)", dir, path)
	}
	os.Remove(path)
	return net.Listen("unix", path)
}

// serveDevControl answers the control socket: one command line per
// connection, then the reply lines, the last "ok" or "error: ...".
func serveDevControl(ln net.Listener, reqs chan<- devRequest) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Time{})
			verb, id, err := parseDevCommand(line)
			if err != nil {
				fmt.Fprintf(c, "error: %v\n", err)
				return
			}
			reply := make(chan string, 16)
			reqs <- devRequest{verb: verb, id: id, reply: reply}
			for l := range reply {
				fmt.Fprintln(c, l)
			}
		}()
	}
}

// readDevStdin takes the same commands typed on the standard input; its
// end (none attached, Ctrl-D) only ends the reading.
func readDevStdin(in io.Reader, reqs chan<- devRequest, out *devOutput) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		verb, id, err := parseDevCommand(sc.Text())
		if err != nil {
			out.printf(true, "dev-cluster: %v\n", err)
			continue
		}
		reply := make(chan string, 16)
		reqs <- devRequest{verb: verb, id: id, reply: reply}
		for l := range reply {
			if l != "ok" {
				out.printf(false, "%s\n", l)
			}
		}
	}
}

// devControlClient is `strata dev-cluster restart|kill|stop N` and
// `status`: it sends the command to the running dev-cluster and prints
// the reply.
func devControlClient(args []string, stdout, stderr io.Writer) int {
	verb := args[0]
	fs := flag.NewFlagSet("dev-cluster "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./strata-dev-cluster", "the running dev-cluster's folder")
	// Flags before and after the broker number.
	rest := args[1:]
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitConfig
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	line := strings.Join(append([]string{verb}, pos...), " ")
	if _, _, err := parseDevCommand(line); err != nil {
		fmt.Fprintln(stderr, "dev-cluster:", err)
		return exitConfig
	}
	path := filepath.Join(*dir, devControlSocket)
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "dev-cluster: no running dev-cluster on %s: %v\n", *dir, err)
		return exitError
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, line); err != nil {
		fmt.Fprintln(stderr, "dev-cluster:", err)
		return exitError
	}
	// A restart waits for the broker to answer (devReadyTimeout) after
	// stopping it (devStopTimeout).
	c.SetReadDeadline(time.Now().Add(devStopTimeout + devReadyTimeout + 10*time.Second))
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "ok":
			return exitOK
		case strings.HasPrefix(l, "error: "):
			fmt.Fprintln(stderr, "dev-cluster:", strings.TrimPrefix(l, "error: "))
			return exitError
		}
		fmt.Fprintln(stdout, l)
	}
	fmt.Fprintf(stderr, "dev-cluster: the dev-cluster closed the connection without an answer (%v)\n", sc.Err())
	return exitError
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

// ready reports whether b serves: a broker answers Kafka requests; a
// controller-only node's replication listener accepts.
func (b *devBroker) ready() bool {
	if !b.controller {
		return kafkaAnswers(b.addr)
	}
	c, err := net.DialTimeout("tcp", b.rep, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
