package protocol

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// FindCoordinator: v0-6
//
// Behaviour: a group key maps to partition abs(hash(group)) % n of
// __consumer_offsets (created on first use) and is answered with that
// partition's leader; a transaction key (type 1) the same way with
// __transaction_state (txncoord). Share keys get COORDINATOR_NOT_AVAILABLE:
// Strata has no share coordinator, by design (share-partition state lives
// in each partition's Raft group, package sharepart).
//
// Version notes:
//   - v1: coordinator type, error message; v2: no change; v3: flexible
//   - v4: batched keys (KIP-699); v5: no change (transactions); v6: share
//     groups (KIP-932)
func init() {
	register(10, 0, 6, concurrent, (*Server).handleFindCoordinator, (*authz).findCoordinator)
}

func (s *Server) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	if req.CoordinatorType != 1 {
		return s.groups.FindCoordinator(ctx, req), nil
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		co := s.txns.FindCoordinator(ctx, k)
		if req.Version < 4 {
			resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
			break
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}

// findCoordinator: DESCRIBE on each key's group or transactional ID; a
// denied key answers its error and no coordinator.
func (z *authz) findCoordinator(r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	allowed := func(key string) (bool, int16) {
		switch r.CoordinatorType {
		case 1:
			return z.ok(acl.Describe, acl.TransactionalID, key), errTxnAuth
		case 2: // share: "group:topicId:partition"
			if i := strings.Index(key, ":"); i >= 0 {
				key = key[:i]
			}
		}
		return z.ok(acl.Describe, acl.Group, key), errGroupAuth
	}
	return nil, func(resp kmsg.Response) {
		fr := resp.(*kmsg.FindCoordinatorResponse)
		if r.Version < 4 {
			if ok, code := allowed(r.CoordinatorKey); !ok {
				fr.ErrorCode, fr.ErrorMessage, fr.NodeID, fr.Host, fr.Port = code, nil, -1, "", -1
			}
			return
		}
		for i := range fr.Coordinators {
			c := &fr.Coordinators[i]
			if ok, code := allowed(c.Key); !ok {
				c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = code, nil, -1, "", -1
			}
		}
	}
}
