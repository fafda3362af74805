package replication

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/replication/transport"
)

// The broker's replication series, read at scrape time from the image and
// the running groups (nothing on the produce path). Names follow Kafka's
// ReplicaManager and controller beans as the JMX exporter spells them:
//
//	kafka_server_replicamanager_leadercount            partitions led here
//	kafka_server_replicamanager_partitioncount         partitions with a replica here
//	kafka_server_replicamanager_underreplicatedpartitions  led here, ISR smaller than the replicas
//	kafka_controller_kafkacontroller_activecontrollercount 1 on the metadata leader
//	strata_partition_snapshot_installs_total           snapshot installs received (this process)
//	strata_share_state_entries_total{result}           share-state entries the partition FSMs applied (this process):
//	                                                   applied, fenced (computed at another leader epoch), refused (did not decode)
//	strata_raft_heartbeats_total                       raft heartbeats this broker sent (all groups)
//	strata_raft_heartbeat_frames_total                 frames that carried them (one per peer per round)
//	strata_raft_elections_total{group}                 elections this broker started (a term it asked votes for)
//	strata_raft_prevotes_total{group}                  pre-vote rounds this broker started
//	strata_raft_prevotes_deferred_total                pre-vote rounds held back (backoff, budget; transport/elections.go)
//	strata_raft_leader_changes_total{group}            leaderships this broker won (a term it led)
//	strata_raft_heartbeat_round_seconds                a heartbeat round's send to answer, per peer (histogram)
//	strata_raft_heartbeat_gap_seconds                  time between two heartbeats a follower group handled (histogram)
//	strata_raft_commit_seconds{group}                  an entry's proposal to its commit and apply on the leader (histogram):
//	                                                   produced batches (partition), metadata commands (metadata)
//	kafka_controller_kafkacontroller_offlinepartitionscount  on the active controller: partitions without a leader
//
// group is "metadata" (the controller quorum) or "partition" (every
// partition group, together). An election or a leadership is counted at
// its first RPC, so groups with one voter (no peers to ask or heartbeat)
// count none; summed over the brokers, leader_changes is the cluster's
// leader changes and elections its elections. A pre-vote round is counted
// when it is sent; the rounds held back are counted apart.
var (
	descLeaders      = prometheus.NewDesc("kafka_server_replicamanager_leadercount", "Partitions whose Raft group this broker leads.", nil, nil)
	descHosted       = prometheus.NewDesc("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker.", nil, nil)
	descUnderRep     = prometheus.NewDesc("kafka_server_replicamanager_underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replica list.", nil, nil)
	descActiveCtl    = prometheus.NewDesc("kafka_controller_kafkacontroller_activecontrollercount", "1 when this broker leads the metadata quorum.", nil, nil)
	descInstalls     = prometheus.NewDesc("strata_partition_snapshot_installs_total", "Partition snapshot installs this broker received (segments streamed from a leader).", nil, nil)
	descBeats        = prometheus.NewDesc("strata_raft_heartbeats_total", "Raft heartbeats this broker sent as a leader, all groups together.", nil, nil)
	descBeatsVouched = prometheus.NewDesc("strata_raft_heartbeats_vouched_total", "Raft heartbeats of steady groups answered at once with the follower's last answer while they travel.", nil, nil)
	descBeatFrames   = prometheus.NewDesc("strata_raft_heartbeat_frames_total", "Frames that carried this broker's raft heartbeats: one per peer per round.", nil, nil)
	descRepeats      = prometheus.NewDesc("strata_raft_commit_repeats_total", "Idle commit-index updates this broker's pipelines answered themselves: the follower had acknowledged the same state already.", nil, nil)
	descCatchUp      = prometheus.NewDesc("strata_raft_catchup_barriers_total", "Barrier entries this broker's raft leaders (partitions and the metadata group) appended so that raft sends a follower the rest of a backlog at once instead of after CommitTimeout.", nil, nil)
	descElections    = prometheus.NewDesc("strata_raft_elections_total", "Raft elections this broker started as a candidate (one per group and term it asked votes for).", []string{"group"}, nil)
	descPreVotes     = prometheus.NewDesc("strata_raft_prevotes_total", "Raft pre-vote rounds this broker sent.", []string{"group"}, nil)
	descPreDeferred  = prometheus.NewDesc("strata_raft_prevotes_deferred_total", "Raft pre-vote rounds of partition groups held back by their backoff or the broker's budget of rounds in flight.", nil, nil)
	descBeatRTT      = prometheus.NewDesc("strata_raft_heartbeat_round_seconds", "Time from sending a round of coalesced raft heartbeats to a peer to its answer.", nil, nil)
	descBeatGap      = prometheus.NewDesc("strata_raft_heartbeat_gap_seconds", "Time between two heartbeats handled by one follower group (a follower starts an election past its heartbeat timeout, 2-4 s by default).", nil, nil)
	descShareEntries = prometheus.NewDesc("strata_share_state_entries_total", "Share-state entries (share-group deltas) the partition replicas of this process applied: applied, fenced (computed at another leader epoch) or refused (did not decode).", []string{"result"}, nil)
	descCommitLat    = prometheus.NewDesc("strata_raft_commit_seconds", "Time from proposing an entry to its commit and apply on the leader: produced batches (group partition) and metadata commands (group metadata).", []string{"group"}, nil)
	descOffline      = prometheus.NewDesc("kafka_controller_kafkacontroller_offlinepartitionscount", "On the active controller (0 elsewhere): partitions without a leader.", nil, nil)
	descLeaderChgs   = prometheus.NewDesc("strata_raft_leader_changes_total", "Raft leaderships this broker won (one per group and term it led).", []string{"group"}, nil)
	descOfflineDirs  = prometheus.NewDesc("kafka_log_logmanager_offlinelogdirectorycount", "1 while the data directory is below strata.log.dir.min.free.bytes (produce refused with KAFKA_STORAGE_ERROR), else 0.", nil, nil)
)

// Commit latencies of this process's raft leaders (all brokers of a test
// process together, as the snapshot installs).
var partitionCommitLatency, metaCommitLatency transport.LatencyHist

// RegisterMetrics registers the broker's replication collector on reg.
func (b *Broker) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(brokerCollector{b})
}

type brokerCollector struct{ b *Broker }

func (brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeaders, descHosted, descUnderRep, descActiveCtl, descInstalls, descBeats, descBeatsVouched, descBeatFrames, descRepeats, descCatchUp, descElections, descPreVotes, descPreDeferred, descLeaderChgs, descBeatRTT, descBeatGap, descShareEntries, descCommitLat, descOffline, descOfflineDirs} {
		ch <- d
	}
}

func (c brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	img := b.img.Load()
	var led, under, offline int
	for _, name := range img.names {
		for _, p := range img.topics[name].Partitions {
			if p.Leader < 0 {
				offline++
			}
			if p.Leader != b.cfg.NodeID {
				continue
			}
			led++
			if len(p.ISR) < len(p.Replicas) {
				under++
			}
		}
	}
	b.groupsMu.RLock()
	hosted := len(b.groups)
	b.groupsMu.RUnlock()
	active := 0.0
	if b.raft != nil && b.raft.State() == raft.Leader {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeaders, prometheus.GaugeValue, float64(led))
	ch <- prometheus.MustNewConstMetric(descHosted, prometheus.GaugeValue, float64(hosted))
	ch <- prometheus.MustNewConstMetric(descUnderRep, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(descActiveCtl, prometheus.GaugeValue, active)
	if active == 0 {
		offline = 0 // the controller reports them, once for the cluster
	}
	ch <- prometheus.MustNewConstMetric(descOffline, prometheus.GaugeValue, float64(offline))
	offlineDirs := 0.0
	if b.disk.full.Load() {
		offlineDirs = 1
	}
	ch <- prometheus.MustNewConstMetric(descOfflineDirs, prometheus.GaugeValue, offlineDirs)
	for _, h := range []struct {
		group string
		h     *transport.LatencyHist
	}{{"partition", &partitionCommitLatency}, {"metadata", &metaCommitLatency}} {
		buckets, count, sum := h.h.Snapshot()
		ch <- prometheus.MustNewConstHistogram(descCommitLat, count, sum, buckets, h.group)
	}
	ch <- prometheus.MustNewConstMetric(descInstalls, prometheus.CounterValue, float64(snapshotInstalls.Load()))
	ch <- prometheus.MustNewConstMetric(descShareEntries, prometheus.CounterValue, float64(shareEntriesApplied.Load()), "applied")
	ch <- prometheus.MustNewConstMetric(descShareEntries, prometheus.CounterValue, float64(shareEntriesFenced.Load()), "fenced")
	ch <- prometheus.MustNewConstMetric(descShareEntries, prometheus.CounterValue, float64(shareEntriesRefused.Load()), "refused")
	if b.mux != nil {
		st := b.mux.Stats()
		ch <- prometheus.MustNewConstMetric(descCatchUp, prometheus.CounterValue, float64(st.CatchUpPokes))
		ch <- prometheus.MustNewConstMetric(descBeats, prometheus.CounterValue, float64(st.BeatsSent))
		ch <- prometheus.MustNewConstMetric(descBeatsVouched, prometheus.CounterValue, float64(st.BeatsVouched))
		ch <- prometheus.MustNewConstMetric(descBeatFrames, prometheus.CounterValue, float64(st.BeatFrames))
		ch <- prometheus.MustNewConstMetric(descRepeats, prometheus.CounterValue, float64(st.CommitRepeats))
		ch <- prometheus.MustNewConstMetric(descPreDeferred, prometheus.CounterValue, float64(st.PreVotesDeferred))
		for _, h := range []struct {
			d *prometheus.Desc
			h *transport.LatencyHist
		}{{descBeatRTT, b.mux.BeatRTT()}, {descBeatGap, b.mux.BeatGap()}} {
			buckets, count, sum := h.h.Snapshot()
			ch <- prometheus.MustNewConstHistogram(h.d, count, sum, buckets)
		}
		for _, k := range []struct {
			name string
			c    transport.RaftCounts
		}{{"metadata", st.Metadata}, {"partition", st.Partitions}} {
			ch <- prometheus.MustNewConstMetric(descElections, prometheus.CounterValue, float64(k.c.Elections), k.name)
			ch <- prometheus.MustNewConstMetric(descPreVotes, prometheus.CounterValue, float64(k.c.PreVotes), k.name)
			ch <- prometheus.MustNewConstMetric(descLeaderChgs, prometheus.CounterValue, float64(k.c.LeaderChanges), k.name)
		}
	}
}
