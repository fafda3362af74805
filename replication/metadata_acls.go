package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/acl"
)

// ACLs (CreateAcls, DeleteAcls) live in the replicated metadata, so every
// broker authorizes alike: CmdACLs adds and removes bindings. A binding
// added twice is there once; removing one that is gone changes nothing
// (two DeleteAcls racing for the same binding both succeed, as in Kafka).

// CmdACLs adds and removes ACL bindings (Command.ACLs). 41: numbers below
// are left for other commands in flight.
const CmdACLs CommandType = 41

// ACLChange is one CmdACLs: bindings to add and to remove.
type ACLChange struct {
	Create []acl.Binding `json:"create,omitempty"`
	Delete []acl.Binding `json:"delete,omitempty"`
}

// applyACLs applies a CmdACLs command to next (a clone).
func (next *image) applyACLs(ch *ACLChange) error {
	if ch == nil || len(ch.Create)+len(ch.Delete) == 0 {
		return errors.New("no changes")
	}
	for _, b := range ch.Create {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("binding %v: %v", b, err)
		}
	}
	s := next.acls.With(ch.Create, ch.Delete)
	if s.Len() > acl.MaxSetSize {
		return fmt.Errorf("more than %d ACLs", acl.MaxSetSize)
	}
	next.acls = s
	return nil
}

// restoreACLs loads a snapshot's bindings.
func (im *image) restoreACLs(list []acl.Binding) error {
	if len(list) == 0 {
		return nil
	}
	if err := im.applyACLs(&ACLChange{Create: list}); err != nil {
		return fmt.Errorf("%w: acls: %v", errBadSnapshot, err)
	}
	return nil
}

// ACLs returns the current bindings (immutable; nil when there are none).
func (q *metadataQuorum) ACLs() *acl.Set { return q.img.Load().acls }

// ChangeACLs commits ch through the metadata quorum.
func (q *metadataQuorum) ChangeACLs(ctx context.Context, ch ACLChange) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, err := q.commitLocked(Command{Type: CmdACLs, ACLs: &ch}); err != nil {
		return err
	}
	q.logger.Info("ACLs changed", "created", len(ch.Create), "deleted", len(ch.Delete))
	return nil
}
