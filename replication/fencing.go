package replication

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// Broker fencing (Kafka's broker.session.timeout.ms).
//
// Kafka's controller fences a broker whose heartbeats stop for the session
// timeout: it leaves Metadata's broker list (its replicas are reported
// offline) and gets no new partitions, until it heartbeats again. Here the
// brokers' heartbeats to the controller are the metadata group's own
// traffic: the controller's Mux hears from every member several times a
// second. The controller checks every fenceCheckInterval; a registered
// broker it has not heard from for the session timeout is fenced, and one
// fenced that it hears from again is unfenced. Both are a
// CmdRegisterBroker with BrokerInfo.Fenced set or cleared (so an older
// broker, which does not know the field, applies it as a registration);
// a broker that starts registers itself unfenced. A controller that has
// led for less than the session timeout fences nobody: it has not had the
// time to hear from everyone.

// defaultBrokerSessionTimeout is Kafka's broker.session.timeout.ms.
const defaultBrokerSessionTimeout = 9 * time.Second

// fenceCheckInterval is how often the controller checks.
const fenceCheckInterval = time.Second

// fenceLoop runs the check while this broker is the controller; it ends
// when the broker stops. fenceDone closes when it returns.
func (b *Broker) fenceLoop() {
	defer close(b.fenceDone)
	timeout := b.cfg.BrokerSessionTimeout
	if timeout <= 0 {
		return
	}
	tick := time.NewTicker(min(fenceCheckInterval, timeout/2))
	defer tick.Stop()
	var leaderSince time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		if b.raft == nil || b.raft.State() != raft.Leader {
			leaderSince = time.Time{}
			continue
		}
		if leaderSince.IsZero() {
			leaderSince = time.Now()
		}
		if b.closed.Load() || !b.ready.Load() || time.Since(leaderSince) < timeout {
			continue
		}
		b.fenceOnce(timeout)
	}
}

// fenceOnce fences the registered brokers not heard from within timeout
// and unfences the fenced ones heard from again.
func (b *Broker) fenceOnce(timeout time.Duration) {
	for _, bi := range b.Brokers() {
		if bi.NodeID == b.cfg.NodeID {
			continue
		}
		addr, err := b.peerAddr(bi.NodeID)
		if err != nil {
			continue // no replication address known: nothing to hear from
		}
		heard := b.mux.PeerHeardWithin(addr, timeout)
		if heard != bi.Fenced {
			continue // fenced and silent, or unfenced and heard
		}
		next := bi
		next.Fenced = !heard
		if err := b.registerAs(next); err != nil {
			b.logger.Warn("broker fencing: could not record the change", "node_id", bi.NodeID, "fenced", next.Fenced, "err", err)
			continue
		}
		if next.Fenced {
			b.logger.Warn("broker fenced: not heard from within broker.session.timeout.ms; left out of Metadata until it is heard from again",
				"node_id", bi.NodeID, "session_timeout", timeout)
		} else {
			b.logger.Info("broker unfenced: heard from again", "node_id", bi.NodeID)
		}
	}
}

// registerAs commits bi as bi.NodeID's registration, if the image still
// holds the registration it was derived from but for Fenced (a broker
// that re-registered meanwhile wins).
func (b *Broker) registerAs(bi BrokerInfo) error {
	ctx, cancel := context.WithTimeout(context.Background(), metadataApplyTimeout)
	defer cancel()
	if err := b.lockWriter(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	cur, ok := b.img.Load().brokers[bi.NodeID]
	if !ok {
		return nil // unregistered meanwhile
	}
	was := cur
	was.Fenced = bi.Fenced
	if was != bi || cur.Fenced == bi.Fenced {
		return nil
	}
	_, err := b.commitLocked(Command{Type: CmdRegisterBroker, Broker: &bi})
	return err
}
