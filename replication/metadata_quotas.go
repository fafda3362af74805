package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/quota"
)

// Client quotas (AlterClientQuotas, DescribeClientQuotas; KIP-546) live in
// the replicated metadata, so every broker enforces the same quotas:
// CmdClientQuotas sets and removes quota configs of quota entities (user,
// client ID, both, or IP; named or default). An entity whose last config
// is removed is gone. Enforcement is the protocol's (internal/quota).

// CmdClientQuotas changes client quota configs (Command.Quotas). 42:
// numbers below are left for other commands in flight.
const CmdClientQuotas CommandType = 42

// applyQuotas applies a CmdClientQuotas command to next (a clone).
func (next *image) applyQuotas(changes []quota.Change) error {
	if len(changes) == 0 {
		return errors.New("no changes")
	}
	s, err := next.quotas.With(changes)
	if err != nil {
		return err
	}
	next.quotas = s
	return nil
}

// restoreQuotas loads a snapshot's quotas.
func (im *image) restoreQuotas(list []quota.Change) error {
	if len(list) == 0 {
		return nil
	}
	if err := im.applyQuotas(list); err != nil {
		return fmt.Errorf("%w: client quotas: %v", errBadSnapshot, err)
	}
	return nil
}

// ClientQuotas returns the current quota configs (immutable; nil when
// there are none).
func (q *metadataQuorum) ClientQuotas() *quota.Set { return q.img.Load().quotas }

// AlterClientQuotas commits changes through the metadata quorum.
func (q *metadataQuorum) AlterClientQuotas(ctx context.Context, changes []quota.Change) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, err := q.commitLocked(Command{Type: CmdClientQuotas, Quotas: changes}); err != nil {
		return err
	}
	q.logger.Info("client quotas changed", "entities", len(changes))
	return nil
}
