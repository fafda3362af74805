package faults

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

const (
	// Kill SIGKILLs a broker and restarts it when the fault heals.
	Kill Kind = "kill"
	// Pause SIGSTOPs a broker for longer than the election timeout, then
	// SIGCONTs it.
	Pause Kind = "pause"
	// Isolate cuts one broker off from its peers both ways (clients
	// still reach it): with 3 brokers, a minority of one and a majority
	// of two.
	Isolate Kind = "isolate"
	// OneWay cuts what one broker sends to the others (it still hears
	// them).
	OneWay Kind = "one-way"
	// Bridge cuts two brokers from each other; the third sees both.
	Bridge Kind = "bridge"
	// Disconnect takes a broker's link down: peers and clients alike
	// lose it.
	Disconnect Kind = "disconnect"
	// Slow delays everything to and from one broker in the harness's
	// proxy by 50-300 ms (jitter +-25%).
	Slow Kind = "slow"
	// Lossy makes one broker's traffic lossy as TCP shows it: 5-20% of
	// chunks late by a retransmission timeout, 0.2% resetting their
	// connection.
	Lossy Kind = "lossy"
	// DiskEIO makes every write of one broker fail with EIO (the
	// broker's injected filesystem); the broker is restarted at the heal,
	// as an operator would after replacing the disk.
	DiskEIO Kind = "disk-eio"
	// DiskFull makes every write of one broker fail with ENOSPC; restarted
	// at the heal.
	DiskFull Kind = "disk-full"
	// FsyncFail makes every fsync of one broker fail with EIO; restarted
	// at the heal.
	FsyncFail Kind = "fsync-fail"
	// ClockSkew moves one broker's wall clock 10 s to 5 min ahead or
	// behind (its injected clock); the heal steps it back.
	ClockSkew Kind = "clock-skew"
)

// AllKinds are the faults the harness injects.
var AllKinds = []Kind{Kill, Pause, Isolate, OneWay, Bridge, Disconnect, Slow, Lossy, DiskEIO, DiskFull, FsyncFail, ClockSkew}

// diskMode is the control file's disk= for a disk fault ("" for others).
func (k Kind) diskMode() string {
	switch k {
	case DiskEIO:
		return "eio"
	case DiskFull:
		return "enospc"
	case FsyncFail:
		return "fsync"
	}
	return ""
}

// ParseKinds parses a comma-separated list of kinds ("" or "all": all).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return AllKinds, nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		ok := false
		for _, k := range AllKinds {
			if string(k) == f {
				out, ok = append(out, k), true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown fault %q (one of %v)", f, AllKinds)
		}
	}
	return out, nil
}

// Step is one fault of a schedule: At after the start, for For, on
// Target (and Other, for a bridge).
type Step struct {
	At, For       time.Duration
	Kind          Kind
	Target, Other int
	// Amount is the fault's size: the latency of slow, the loss of lossy
	// (per mille), the clock offset of clock-skew.
	Amount time.Duration
}

func (s Step) String() string {
	t := fmt.Sprintf("broker %d", s.Target)
	if s.Kind == Bridge {
		t = fmt.Sprintf("brokers %d and %d apart", s.Target, s.Other)
	}
	switch s.Kind {
	case Slow:
		t += fmt.Sprintf(" (%v)", s.Amount)
	case Lossy:
		t += fmt.Sprintf(" (%d%%)", s.Amount/10)
	case ClockSkew:
		t += fmt.Sprintf(" (%+v)", s.Amount)
	}
	return fmt.Sprintf("+%.1fs %s %s for %.1fs", s.At.Seconds(), s.Kind, t, s.For.Seconds())
}

// Schedule draws the faults of a run from seed: one at a time, each
// lasting 1.5-4.5 s (a pause at least 3 election timeouts), with 1-3 s
// of quiet between, over dur; kinds taken in turn from a shuffled list so
// that a short run tries each.
func Schedule(seed int64, dur, hb time.Duration, brokers int, kinds []Kind) []Step {
	rng := rand.New(rand.NewSource(seed))
	order := append([]Kind(nil), kinds...)
	var out []Step
	at := 2 * time.Second // let the workload start
	for i := 0; ; i++ {
		if i%len(order) == 0 {
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		s := Step{At: at, Kind: order[i%len(order)], Target: 1 + rng.Intn(brokers),
			For: 1500*time.Millisecond + time.Duration(rng.Int63n(int64(3*time.Second)))}
		if s.Kind == Pause {
			s.For = max(s.For, 3*2*hb)
		}
		switch s.Kind {
		case Bridge:
			s.Other = 1 + (s.Target+rng.Intn(brokers-1))%brokers
		case Slow:
			s.Amount = time.Duration(50+rng.Intn(251)) * time.Millisecond
		case Lossy:
			s.Amount = time.Duration(50 + rng.Intn(151)) // per mille
		case ClockSkew:
			s.Amount = time.Duration(10+rng.Intn(291)) * time.Second
			if rng.Intn(2) == 0 {
				s.Amount = -s.Amount
			}
		}
		if s.At+s.For > dur {
			break
		}
		out = append(out, s)
		at += s.For + time.Second + time.Duration(rng.Int63n(int64(2*time.Second)))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}
