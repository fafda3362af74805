package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The network: each broker in its own network namespace (nsPrefix+id),
// joined by a veth pair (vethPrefix+id on the host side, eth0 inside) to
// one bridge in the host's namespace, which carries the bridge address
// and so lets the harness's clients reach every broker:
//
//	client (host) ── strata-fbr (10.77.0.1) ──┬── strata-fv1 ═ eth0 10.77.0.11 [strata-f1]
//	                                          ├── strata-fv2 ═ eth0 10.77.0.12 [strata-f2]
//	                                          └── strata-fv3 ═ eth0 10.77.0.13 [strata-f3]
//
// Partitions are blackhole routes inside a namespace: a route to peer j
// in broker i's namespace drops what i sends to j (a one-way cut; i's
// connections to j and j's to i both stall, as TCP needs both ways, but
// j's packets still reach i). A disconnect takes broker i's veth down:
// nobody, clients included, reaches it. Everything is named with the
// prefixes, so a sweep removes what an earlier run left.
const (
	nsPrefix   = "strata-f"
	vethPrefix = "strata-fv"
	bridgeName = "strata-fbr"
	subnet     = "10.77.0"
	bridgeIP   = subnet + ".1"
)

// ErrNoNetwork is the error of a network fault in the loopback
// fallback, which has no network of its own to cut.
var ErrNoNetwork = errors.New("network faults need network namespaces")

// loopbackIP is broker id's address in the loopback fallback: a loopback
// address of its own (all of 127.0.0.0/8 is local on Linux), fixed ports
// that no other test takes.
func loopbackIP(id int) string { return fmt.Sprintf("127.77.0.%d", 10+id) }

// lockPath serialises harness runs on one machine (they share the names
// and the subnet); loopbackLockPath the fallback's runs (they share the
// loopback addresses and ports).
const (
	lockPath         = "/tmp/strata-faults.lock"
	loopbackLockPath = "/tmp/strata-faults-loopback.lock"
)

// nodeIP is broker id's address.
func nodeIP(id int) string { return fmt.Sprintf("%s.%d", subnet, 10+id) }

func nsName(id int) string { return fmt.Sprintf("%s%d", nsPrefix, id) }

// ipCmd runs ip with args.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NetnsAvailable reports whether network namespaces can be made here
// (root, and the ip tool), and why not.
func NetnsAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("no ip tool (iproute2)")
	}
	name := nsPrefix + "probe"
	ipCmd("netns", "del", name)
	if err := ipCmd("netns", "add", name); err != nil {
		return err
	}
	return ipCmd("netns", "del", name)
}

// netns is the namespaces of one run, or, loop set, the loopback
// fallback: brokers run in the harness's namespace, each on its own
// loopback address, and only process faults (kill, pause) can be made.
type netns struct {
	n    int
	loop bool
	lock *os.File

	mu  sync.Mutex
	cut map[[2]int]bool // {from, to}: blackholed; protected by mu
	off map[int]bool    // veth down; protected by mu
}

// Sweep removes every namespace, veth and bridge a run may have left
// (the harness's prefixes only).
func Sweep() error {
	var errs []error
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.HasPrefix(f[0], nsPrefix) {
			// Brokers of a run that was itself killed would keep the
			// namespace alive and their ports bound.
			pids, _ := exec.Command("ip", "netns", "pids", f[0]).Output()
			for _, p := range strings.Fields(string(pids)) {
				if pid, err := strconv.Atoi(p); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if err := ipCmd("netns", "del", f[0]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, vethPrefix) || name == bridgeName {
			if err := ipCmd("link", "del", name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// takeLock takes a machine-wide lock.
func takeLock(path string) (*os.File, error) {
	lf, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		lf.Close()
		return nil, err
	}
	return lf, nil
}

// newLoopback is the fallback where namespaces cannot be made.
func newLoopback(n int) (*netns, error) {
	lf, err := takeLock(loopbackLockPath)
	if err != nil {
		return nil, err
	}
	return &netns{n: n, loop: true, lock: lf}, nil
}

// ip is broker id's address.
func (nw *netns) ip(id int) string {
	if nw.loop {
		return loopbackIP(id)
	}
	return nodeIP(id)
}

// newNetns takes the machine's harness lock, sweeps, and makes n
// namespaces on one bridge.
func newNetns(n int) (*netns, error) {
	lf, err := takeLock(lockPath)
	if err != nil {
		return nil, err
	}
	nw := &netns{n: n, lock: lf, cut: map[[2]int]bool{}, off: map[int]bool{}}
	if err := Sweep(); err != nil {
		nw.close()
		return nil, err
	}
	steps := [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	}
	for id := 1; id <= n; id++ {
		// The proxy's address for the broker (proxy.go).
		steps = append(steps, []string{"addr", "add", proxyIP(id) + "/24", "dev", bridgeName})
	}
	for id := 1; id <= n; id++ {
		ns, veth := nsName(id), fmt.Sprintf("%s%d", vethPrefix, id)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", bridgeName},
			[]string{"link", "set", veth, "up"},
			[]string{"-n", ns, "addr", "add", nodeIP(id) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			nw.close()
			return nil, err
		}
	}
	return nw, nil
}

// command returns cmd run inside broker id's namespace (ip netns exec
// execs it: the process is the broker itself, for signals).
func (nw *netns) command(id int, name string, args ...string) *exec.Cmd {
	if nw.loop {
		return exec.Command(name, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", nsName(id), name}, args...)...)
}

// cutOneWay drops what from sends to to.
func (nw *netns) cutOneWay(from, to int) error {
	if nw.loop {
		return ErrNoNetwork
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.cut[[2]int{from, to}] {
		return nil
	}
	for _, ip := range []string{nodeIP(to), proxyIP(to)} {
		if err := ipCmd("-n", nsName(from), "route", "add", "blackhole", ip+"/32"); err != nil {
			return err
		}
	}
	nw.cut[[2]int{from, to}] = true
	return nil
}

// isCut reports whether what from sends to to is dropped.
func (nw *netns) isCut(from, to int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.cut[[2]int{from, to}]
}

// disconnect takes id's link down (clients cannot reach it either).
func (nw *netns) disconnect(id int) error {
	if nw.loop {
		return ErrNoNetwork
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if err := ipCmd("link", "set", fmt.Sprintf("%s%d", vethPrefix, id), "down"); err != nil {
		return err
	}
	nw.off[id] = true
	return nil
}

// heal removes every cut and brings every link up.
func (nw *netns) heal() error {
	if nw.loop {
		return nil
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for c := range nw.cut {
		for _, ip := range []string{nodeIP(c[1]), proxyIP(c[1])} {
			if err := ipCmd("-n", nsName(c[0]), "route", "del", "blackhole", ip+"/32"); err != nil {
				errs = append(errs, err)
			}
		}
		delete(nw.cut, c)
	}
	for id := range nw.off {
		if err := ipCmd("link", "set", fmt.Sprintf("%s%d", vethPrefix, id), "up"); err != nil {
			errs = append(errs, err)
		}
		delete(nw.off, id)
	}
	return errors.Join(errs...)
}

// close sweeps and releases the lock.
func (nw *netns) close() error {
	var err error
	if !nw.loop {
		err = Sweep()
	}
	nw.lock.Close()
	return err
}
