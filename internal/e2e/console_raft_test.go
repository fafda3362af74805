package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// raftView is the console's /ui/api/raft (internal/console/raft.go), the
// fields this test reads.
type raftView struct {
	QuorumLeader int32  `json:"quorumLeader"`
	QuorumErr    string `json:"quorumError"`
	Serving      int32  `json:"serving"`
	Brokers      []struct {
		NodeID  int32  `json:"nodeId"`
		Quorum  string `json:"quorum"`
		LogEnd  int64  `json:"logEnd"`
		Leads   int    `json:"leads"`
		Follows int    `json:"follows"`
		Err     string `json:"error"`
		Local   *struct {
			NodeID         int32              `json:"nodeId"`
			MetadataLeader bool               `json:"metadataLeader"`
			Led            int                `json:"led"`
			Hosted         int                `json:"hosted"`
			Elections      map[string]float64 `json:"elections"`
			LeaderChanges  map[string]float64 `json:"leaderChanges"`
			Commit         map[string]struct {
				Count uint64   `json:"count"`
				P99   *float64 `json:"p99Ms"`
			} `json:"commit"`
		} `json:"local"`
	} `json:"brokers"`
}

func getRaftView(ctx context.Context, url string) (raftView, error) {
	var v raftView
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return v, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return v, json.Unmarshal(body, &v)
}

// TestConsoleRaftViews: the console's per-broker Raft view on a
// three-broker cluster (three `strata serve` processes, each with its own
// metrics listener on a port of its own). Any broker's console shows all
// three: each one's part in the metadata quorum (one leader, two voters,
// as DescribeQuorum says), the partition groups each leads and follows
// (summing to the partitions and their replicas), and each one's own
// figures read from its console (found through the metrics.listener its
// DescribeConfigs reports): leaderships won, commit latency on the
// metadata leader. SIGKILL the metadata leader: the survivors' view
// shows a new leader, which counts the leadership it won, and the dead
// broker's figures as unreachable.
func TestConsoleRaftViews(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bs := startQuorum(t, 3, "--set", "metrics.listener=127.0.0.1:0", "--set", "default.replication.factor=3")
	uis := make([]string, len(bs))
	for i, b := range bs {
		uis[i] = "http://" + stabMetricsAddr(t, b) + "/ui/"
	}
	cl := bs[0].client()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 6, 3, nil, "raft-view"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raft-view", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Every console shows every broker, with its own figures.
	var v raftView
	var last string
	for i, ui := range uis {
		ok := testwait.Until(60*time.Second, func() bool {
			var err error
			v, err = getRaftView(ctx, ui+"api/raft")
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("%+v", v)
			if v.Serving != int32(i+1) || v.QuorumErr != "" || len(v.Brokers) != 3 {
				return false
			}
			leaders, voters, leads, follows := 0, 0, 0, 0
			for _, b := range v.Brokers {
				if b.Local == nil || b.Err != "" || b.Local.NodeID != b.NodeID || b.LogEnd < 0 {
					return false
				}
				switch b.Quorum {
				case "leader":
					leaders++
					if b.NodeID != v.QuorumLeader || !b.Local.MetadataLeader || b.Local.LeaderChanges["metadata"] < 1 ||
						b.Local.Commit["metadata"].Count == 0 || b.Local.Commit["metadata"].P99 == nil {
						return false
					}
				case "voter":
					voters++
				}
				leads += b.Leads
				follows += b.Follows
			}
			// raft-view: 6 partitions at RF 3 (plus any internal topic,
			// also at RF 3): leads and follows are 1:2.
			return leaders == 1 && voters == 2 && leads >= 6 && follows == 2*leads
		})
		if !ok {
			t.Fatalf("broker %d's console: the Raft view of three brokers not shown; last: %s", i+1, last)
		}
	}
	t.Logf("the Raft view: %s", last)

	// The metadata leader killed: a survivor's view shows another
	// leader, its leadership counted, and the dead broker unreachable.
	old := v.QuorumLeader
	bs[old-1].kill()
	survivor := uis[old%3]
	ok := testwait.Until(60*time.Second, func() bool {
		var err error
		v, err = getRaftView(ctx, survivor+"api/raft")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%+v", v)
		if v.QuorumErr != "" || v.QuorumLeader == old || v.QuorumLeader < 1 {
			return false
		}
		seenDead, seenNew := false, false
		for _, b := range v.Brokers {
			switch b.NodeID {
			case old:
				seenDead = b.Local == nil && b.Err != ""
			case v.QuorumLeader:
				seenNew = b.Quorum == "leader" && b.Local != nil && b.Local.MetadataLeader && b.Local.LeaderChanges["metadata"] >= 1
			}
		}
		return seenDead && seenNew
	})
	if !ok {
		t.Fatalf("after broker %d (the metadata leader) was killed: last view %s", old, last)
	}
}
