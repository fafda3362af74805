package bench

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterReadyTimeout bounds the wait for a dev-cluster's brokers to
// register with each other after they answer (seconds on an idle
// machine).
const clusterReadyTimeout = 60 * time.Second

// freePortRun finds a base port such that base+off is free on 127.0.0.1
// for every offset (dev-cluster derives every listener from one port). It
// looks below the kernel's ephemeral range (32768 and up on Linux) so
// that client connections cannot take one between the check and the
// brokers' bind.
func freePortRun(offsets ...int) (int, error) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for try := 0; try < 50; try++ {
		base := 20000 + rng.Intn(12000-200)
		var lns []net.Listener
		ok := true
		for _, off := range offsets {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("%w: no run of free ports found", ErrBroker)
}

// clusterReady waits until the child (a dev-cluster) has n broker
// processes and its first broker's Metadata lists n brokers and a
// controller (a topic at replication factor n needs them all registered),
// and makes those processes the child's members.
func (c *child) clusterReady(ctx context.Context, n int) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		kids, err := ProcChildren(c.cmd.Process.Pid, n+1)
		if err != nil {
			return err
		}
		if len(kids) == n {
			sort.Ints(kids)
			c.members = kids
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s has %d broker processes, want %d", ErrBroker, c.name, len(kids), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitList(c.addr)...), kgo.ClientID("strata-bench-admin"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBroker, err)
	}
	defer cl.Close()
	var last string
	for time.Now().Before(deadline) {
		// A direct request: kadm's Metadata answers from kgo's metadata
		// cache, which a request naming no topics never refreshes, so it
		// would keep showing the brokers registered at the first call.
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(mctx, cl)
		cancel()
		if err == nil && len(resp.Brokers) == n && resp.ControllerID >= 0 {
			return nil
		}
		var ids []string
		controller := int32(-1)
		if resp != nil {
			controller = resp.ControllerID
			for _, b := range resp.Brokers {
				ids = append(ids, strconv.Itoa(int(b.NodeID)))
			}
		}
		last = fmt.Sprintf("brokers [%s], controller %d, err %v", strings.Join(ids, " "), controller, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrBroker, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: %s: not %d brokers within %v (%s)", ErrBroker, c.name, n, clusterReadyTimeout, last)
}
