package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/replication/transport"
)

// metadataFSM is the metadata group's raft.FSM: image.Apply over raft
// entries (doc.go, "Raft design"). An entry's data is a metadata record
// body (version byte + JSON command, metadata_log.go), so the metadata log
// file and the raft log carry the same bytes for a command.
//
// Raft calls Apply, Snapshot and Restore from its one FSM goroutine;
// readers load the image through the atomic pointer. onApply runs on that
// goroutine after each applied command, for the broker's local effects
// (open or delete partition logs, start or stop groups); it must not call
// back into raft and wait (it would deadlock the FSM goroutine).
type metadataFSM struct {
	img    *atomic.Pointer[image] // shared with Broker.img
	logger *slog.Logger
	// onApply carries out an applied command's local effects. It must call
	// publish exactly once: before its effects when they remove things,
	// after them when they make partitions usable (see Apply).
	onApply func(index uint64, c Command, prev, next *image, publish func())
	// applied is the raft index of the last command whose image is
	// published (raft's own AppliedIndex moves when an entry is handed to
	// the FSM goroutine, before Apply has run, so read-your-writes waits
	// on this instead). After a snapshot restore it lags until the next
	// command; waiters then time out with a retriable error.
	applied atomic.Uint64
}

var _ raft.FSM = (*metadataFSM)(nil)

// newMetadataFSM returns an FSM publishing its image in img (a new
// pointer when nil) and starting from img's current image (empty if none).
func newMetadataFSM(logger *slog.Logger, img *atomic.Pointer[image], onApply func(index uint64, c Command, prev, next *image, publish func())) *metadataFSM {
	if img == nil {
		img = &atomic.Pointer[image]{}
	}
	if img.Load() == nil {
		img.Store(newImage())
	}
	return &metadataFSM{logger: logger, img: img, onApply: onApply}
}

// Image is the current metadata.
func (f *metadataFSM) Image() *image { return f.img.Load() }

// fsmResult is what Apply returns through raft's ApplyFuture.Response.
type fsmResult struct {
	img *image
	err error // wraps errRejected for a refused command
}

// encodeCommandEntry is the raft entry data of c.
func encodeCommandEntry(c Command) ([]byte, error) {
	rec, err := encodeMetadataRecord(c)
	if err != nil {
		return nil, err
	}
	return rec[metadataHeaderBytes:], nil
}

func decodeCommandEntry(data []byte) (Command, error) {
	var c Command
	if len(data) < 2 || data[0] != metadataRecordVersion {
		return c, fmt.Errorf("%w: metadata entry of %d bytes, version %v", transport.ErrCodec, len(data), firstByte(data))
	}
	if err := json.Unmarshal(data[1:], &c); err != nil {
		return c, fmt.Errorf("%w: metadata entry: %v", transport.ErrCodec, err)
	}
	return c, nil
}

func firstByte(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}

// Apply applies one committed command. A command that does not decode or
// that image.Apply rejects leaves the image as it was on every replica
// (deterministically), and the error goes back to the proposer.
func (f *metadataFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := decodeCommandEntry(l.Data)
	if err != nil {
		f.logger.Error("metadata raft entry does not decode; skipped", "index", l.Index, "err", err)
		f.applied.Store(l.Index)
		return fsmResult{img: f.img.Load(), err: err}
	}
	prev := f.img.Load()
	next, err := prev.Apply(c)
	if err != nil {
		f.img.Store(next)
		f.applied.Store(l.Index)
		return fsmResult{img: next, err: err}
	}
	// Effects that make partitions usable (opening their logs) run before
	// the image that names them is published, so a reader that finds a
	// partition led here also finds its log open; effects that remove
	// things (deleting logs) run after, so no published image points at a
	// removed log. onApply decides, and publishes.
	publish := func() {
		f.img.Store(next)
		f.applied.Store(l.Index)
	}
	if f.onApply != nil {
		f.onApply(l.Index, c, prev, next, publish)
	} else {
		publish()
	}
	return fsmResult{img: next}
}

// Snapshot captures the current image; it is immutable, so Persist can
// encode it while Apply goes on.
func (f *metadataFSM) Snapshot() (raft.FSMSnapshot, error) {
	return imageSnapshot{img: f.img.Load()}, nil
}

// Restore replaces the image with a snapshot's.
func (f *metadataFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxImageSnapshotBytes+1))
	if err != nil {
		return fmt.Errorf("replication: read metadata snapshot: %w", err)
	}
	if len(b) > maxImageSnapshotBytes {
		return fmt.Errorf("replication: metadata snapshot larger than %d bytes", maxImageSnapshotBytes)
	}
	img, err := decodeImage(b)
	if err != nil {
		return err
	}
	prev := f.img.Load()
	publish := func() { f.img.Store(img) }
	if f.onApply != nil {
		f.onApply(0, Command{}, prev, img, publish)
	} else {
		publish()
	}
	return nil
}

// maxImageSnapshotBytes bounds a metadata snapshot (maxPartitionsPerBroker
// partitions at ~100 bytes of JSON each, with room).
const maxImageSnapshotBytes = 256 << 20

// imageJSON is the snapshot encoding of an image. Field names are on disk
// and on the wire (InstallSnapshot): keep them.
type imageJSON struct {
	Version        int           `json:"v"`
	Topics         []*TopicInfo  `json:"topics"`
	Brokers        []BrokerInfo  `json:"brokers"`
	Pending        []pendingJSON `json:"pending"`
	NextProducerID int64         `json:"nextProducerId"`
	Applied        int64         `json:"applied"`
	// BrokerConfigs are the dynamic broker configs by resource (JSON
	// sorts map keys, so the encoding stays deterministic).
	BrokerConfigs map[string]map[string]string `json:"brokerConfigs,omitempty"`
	// GroupConfigs are the group config overrides by group ID;
	// Features the finalized feature levels and FeaturesEpoch their epoch.
	GroupConfigs  map[string]map[string]string `json:"groupConfigs,omitempty"`
	Features      map[string]int16             `json:"features,omitempty"`
	FeaturesEpoch int64                        `json:"featuresEpoch,omitempty"`
	// Scram are the SCRAM credentials (metadata_scram.go).
	Scram []ScramChange `json:"scram,omitempty"`
	// ACLs are the ACL bindings (metadata_acls.go), sorted.
	ACLs []acl.Binding `json:"acls,omitempty"`
	// Quotas are the client quota configs (metadata_quotas.go), sorted.
	Quotas []quota.Change `json:"quotas,omitempty"`
}

type pendingJSON struct {
	ID         [16]byte `json:"id"`
	Name       string   `json:"name"`
	Partitions int32    `json:"partitions"`
}

const imageSnapshotVersion = 1

// encodeImage is deterministic (sorted), so equal images encode equally.
func encodeImage(im *image) ([]byte, error) {
	j := imageJSON{Version: imageSnapshotVersion, NextProducerID: im.nextProducerID, Applied: im.applied,
		BrokerConfigs: im.brokerConfigs, GroupConfigs: im.groupConfigs, Features: im.features, FeaturesEpoch: im.featuresEpoch}
	for _, n := range im.names {
		j.Topics = append(j.Topics, im.topics[n])
	}
	for _, b := range im.brokers {
		j.Brokers = append(j.Brokers, b)
	}
	sort.Slice(j.Brokers, func(a, b int) bool { return j.Brokers[a].NodeID < j.Brokers[b].NodeID })
	j.Scram = im.scramSnapshot()
	j.ACLs = im.acls.All()
	j.Quotas = im.quotas.All()
	for id, p := range im.pending {
		j.Pending = append(j.Pending, pendingJSON{ID: id, Name: p.Name, Partitions: p.Partitions})
	}
	sort.Slice(j.Pending, func(a, b int) bool { return j.Pending[a].Name < j.Pending[b].Name })
	return json.Marshal(j)
}

var errBadSnapshot = errors.New("replication: bad metadata snapshot")

func decodeImage(b []byte) (*image, error) {
	var j imageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	if j.Version != imageSnapshotVersion {
		return nil, fmt.Errorf("%w: version %d", errBadSnapshot, j.Version)
	}
	im := newImage()
	im.nextProducerID, im.applied = j.NextProducerID, j.Applied
	var bad error
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		for _, t := range j.Topics {
			if t == nil || t.Name == "" || topics[t.Name] != nil || byID[t.ID] != nil || t.ID == ([16]byte{}) {
				bad = fmt.Errorf("%w: duplicate, unnamed or zero-id topic", errBadSnapshot)
				return
			}
			for i, p := range t.Partitions {
				if p.Partition != int32(i) || len(p.Replicas) == 0 {
					bad = fmt.Errorf("%w: topic %s: partition %d misnumbered or without replicas", errBadSnapshot, t.Name, i)
					return
				}
			}
			if t.Configs == nil {
				t.Configs = map[string]string{}
			}
			topics[t.Name], byID[t.ID] = t, t
		}
	})
	if bad != nil {
		return nil, bad
	}
	for _, br := range j.Brokers {
		im.brokers[br.NodeID] = br
	}
	for _, p := range j.Pending {
		im.pending[p.ID] = pendingDelete{Name: p.Name, Partitions: p.Partitions}
	}
	for res, set := range j.BrokerConfigs {
		if err := im.setBrokerConfigs(res, set); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
		}
	}
	if len(j.GroupConfigs) > maxGroupConfigGroups {
		return nil, fmt.Errorf("%w: %d groups with configs", errBadSnapshot, len(j.GroupConfigs))
	}
	im.groupConfigs = make(map[string]map[string]string, len(j.GroupConfigs))
	for group, set := range j.GroupConfigs {
		if err := checkGroupConfigs(group, set); err != nil || len(set) == 0 {
			return nil, fmt.Errorf("%w: group configs of %q: %v", errBadSnapshot, group, err)
		}
		im.groupConfigs[group] = set
	}
	if len(j.Features) > 0 {
		if err := im.setFeatures(j.Features); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
		}
	}
	im.featuresEpoch = j.FeaturesEpoch
	if err := im.restoreScram(j.Scram); err != nil {
		return nil, err
	}
	if err := im.restoreACLs(j.ACLs); err != nil {
		return nil, err
	}
	if err := im.restoreQuotas(j.Quotas); err != nil {
		return nil, err
	}
	return im, nil
}

// imageSnapshot is an FSMSnapshot of one immutable image.
type imageSnapshot struct{ img *image }

func (s imageSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := encodeImage(s.img)
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("replication: persist metadata snapshot: %w", err)
	}
	return sink.Close()
}

func (imageSnapshot) Release() {}
