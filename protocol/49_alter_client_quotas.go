package protocol

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/replication"
)

// AlterClientQuotas: v0-1 (KIP-546)
//
// Behaviour:
//   - Each entry names a quota entity (user, client-id, both, or ip; a
//     null name is the default) and sets or removes quota configs:
//     producer_byte_rate and consumer_byte_rate (whole bytes per second),
//     request_percentage, controller_mutation_rate, and for ip entities
//     connection_creation_rate (KIP-612, enforced when a connection is
//     accepted). The changes of every valid entry commit
//     together through the metadata quorum (replication/metadata_quotas.go) and
//     take effect on every broker as it applies them.
//   - Per entry, as Kafka's ClientQuotaControlManager: an empty entity, a
//     type twice, an unknown type, an empty name, a combination other
//     than user, client-id, user+client-id or ip, an IP that does not
//     parse, a key the entity cannot have, a non-integral value for a
//     LONG config, or a key twice is INVALID_REQUEST; an entity named
//     twice in one request is INVALID_REQUEST for both. Removing a key
//     that is not set is no error.
//   - validate_only checks everything and commits nothing.
//
// Differences from Kafka: negative, infinite and NaN values are
// INVALID_REQUEST (Kafka stores them; no rate can be held to them).
//
// With ACLs on it needs ALTER_CONFIGS on the cluster (acl_rules.go), as
// Kafka.
//
// Version notes:
//   - v1: flexible versions.
func init() {
	register(49, 0, 1, barrier, (*Server).handleAlterClientQuotas,
		needsClusterElse(acl.AlterConfigs, alterClientQuotasDenied))
}

// maxQuotaOpsPerEntry bounds the ops of one entry (Kafka has five keys).
const maxQuotaOpsPerEntry = 64

func (s *Server) handleAlterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	type result struct {
		code   int16
		msg    string
		entity quota.Entity
		change *quota.Change
	}
	results := make([]result, len(req.Entries))
	seen := map[quota.Entity]int{}
	for i, en := range req.Entries {
		r := &results[i]
		types := make([]string, len(en.Entity))
		names := make([]*string, len(en.Entity))
		for j, c := range en.Entity {
			types[j], names[j] = c.Type, c.Name
		}
		e, err := quota.NewEntity(types, names)
		if err != nil {
			r.code, r.msg = kerr.InvalidRequest.Code, quotaMsg(err)
			continue
		}
		r.entity = e
		if j, dup := seen[e]; dup {
			r.code, r.msg = kerr.InvalidRequest.Code, "Ignoring duplicate entity "+e.String()
			if results[j].code == 0 {
				results[j].code, results[j].msg, results[j].change = r.code, r.msg, nil
			}
			continue
		}
		seen[e] = i
		if len(en.Ops) > maxQuotaOpsPerEntry {
			r.code, r.msg = kerr.InvalidRequest.Code, "Too many quota ops for one entity"
			continue
		}
		ch := &quota.Change{Entity: e, Set: map[string]float64{}}
		keys := map[string]bool{}
		for _, op := range en.Ops {
			if keys[op.Key] {
				r.code, r.msg = kerr.InvalidRequest.Code, "Duplicate quota key "+op.Key+" not updating quota for this entity "+e.String()
				break
			}
			keys[op.Key] = true
			if op.Remove {
				ch.Remove = append(ch.Remove, op.Key)
				continue
			}
			if err := quota.CheckValue(e, op.Key, op.Value); err != nil {
				r.code, r.msg = kerr.InvalidRequest.Code, quotaMsg(err)
				break
			}
			ch.Set[op.Key] = op.Value
		}
		if r.code == 0 && len(en.Ops) > 0 {
			r.change = ch
		}
	}
	var changes []quota.Change
	for _, r := range results {
		if r.code == 0 && r.change != nil {
			changes = append(changes, *r.change)
		}
	}
	var commitCode int16
	var commitMsg string
	if len(changes) > 0 && !req.ValidateOnly {
		var err error
		if s.broker == nil {
			err = replication.ErrNotController
		} else {
			err = s.broker.AlterClientQuotas(ctx, changes)
		}
		if err != nil {
			commitCode, commitMsg = errCode(err), err.Error()
			s.log.Warn("AlterClientQuotas failed", "err", err)
		}
	}
	for i, en := range req.Entries {
		r := results[i]
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range en.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = c.Type, c.Name
			out.Entity = append(out.Entity, oe)
		}
		code, msg := r.code, r.msg
		if code == 0 {
			code, msg = commitCode, commitMsg
		}
		out.ErrorCode = code
		if code != 0 {
			out.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp, nil
}

// quotaMsg is a validation error's message as Kafka words it (without
// the package prefix).
func quotaMsg(err error) string {
	return strings.TrimPrefix(err.Error(), quota.ErrInvalid.Error()+": ")
}

// alterClientQuotasDenied answers every entry CLUSTER_AUTHORIZATION_FAILED:
// AlterClientQuotas needs ALTER_CONFIGS on the cluster, as Kafka's
// handleAlterClientQuotasRequest.
func alterClientQuotasDenied(r *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	msg := kerr.ClusterAuthorizationFailed.Message
	for _, en := range r.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		out.ErrorCode, out.ErrorMessage = errClusterAuth, &msg
		for _, c := range en.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = c.Type, c.Name
			out.Entity = append(out.Entity, oe)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}
