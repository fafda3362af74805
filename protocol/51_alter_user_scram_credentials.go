package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/replication"
)

// AlterUserScramCredentials: v0
//
// Behaviour:
//   - Upsertions carry the salted password (the client salts it, KIP-554);
//     the broker derives SCRAM's stored and server keys from it and
//     commits them through the metadata quorum (replication/metadata_scram.go): the
//     password and the salted password are never stored.
//   - Per user, as Kafka: an unknown mechanism is
//     UNSUPPORTED_SASL_MECHANISM; an empty user name, empty salt or
//     salted password, or iterations outside 4096..16384 is
//     UNACCEPTABLE_CREDENTIAL; a user named twice for one mechanism is
//     DUPLICATE_RESOURCE; deleting a credential that does not exist is
//     RESOURCE_NOT_FOUND. A user with any error changes nothing; the
//     others' changes commit together.
//
// With ACLs on it needs ALTER on the cluster (acl_rules.go), as Kafka.
func init() {
	register(51, 0, 0, barrier, (*Server).handleAlterUserScramCredentials,
		needsClusterElse(acl.Alter, alterUserSCRAMCredentialsDenied))
}

func (s *Server) handleAlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type userResult struct {
		code    int16
		msg     string
		changes []replication.ScramChange
	}
	var order []string
	users := map[string]*userResult{}
	seen := map[[2]string]bool{}
	get := func(name string) *userResult {
		u := users[name]
		if u == nil {
			u = &userResult{}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	fail := func(u *userResult, code int16, msg string) {
		if u.code == 0 {
			u.code, u.msg = code, msg
		}
	}
	check := func(name string, mechType int8) (*userResult, string, bool) {
		u := get(name)
		mech := auth.ScramMechanismFromType(mechType)
		switch {
		case name == "":
			fail(u, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			fail(u, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case seen[[2]string{name, mech}]:
			fail(u, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		default:
			seen[[2]string{name, mech}] = true
			return u, mech, true
		}
		return u, mech, false
	}
	for _, d := range req.Deletions {
		u, mech, ok := check(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := s.broker.ScramCredential(d.Name, mech); !exists {
			fail(u, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			continue
		}
		u.changes = append(u.changes, replication.ScramChange{User: d.Name, Mechanism: mech})
	}
	for _, up := range req.Upsertions {
		u, mech, ok := check(up.Name, up.Mechanism)
		if !ok {
			continue
		}
		if up.Iterations < auth.MinScramIterations || up.Iterations > auth.MaxScramIterations {
			fail(u, kerr.UnacceptableCredential.Code, "Iterations must be between 4096 and 16384")
			continue
		}
		if len(up.Salt) == 0 || len(up.Salt) > 1024 || len(up.SaltedPassword) == 0 || len(up.SaltedPassword) > 1024 {
			fail(u, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
			continue
		}
		cred, err := auth.CredentialFromSaltedPassword(mech, up.SaltedPassword, up.Salt, up.Iterations)
		if err != nil {
			fail(u, kerr.UnsupportedSaslMechanism.Code, err.Error())
			continue
		}
		u.changes = append(u.changes, replication.ScramChange{User: up.Name, Mechanism: mech, Credential: &cred})
	}
	var all []replication.ScramChange
	for _, name := range order {
		if u := users[name]; u.code == 0 {
			all = append(all, u.changes...)
		}
	}
	var commitCode int16
	var commitMsg string
	if len(all) > 0 {
		if err := s.broker.AlterScramCredentials(ctx, all); err != nil {
			commitCode, commitMsg = errCode(err), err.Error()
		}
	}
	for _, name := range order {
		u := users[name]
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = name
		code, msg := u.code, u.msg
		if code == 0 {
			code, msg = commitCode, commitMsg
		}
		r.ErrorCode = code
		if code != 0 {
			r.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// scramLookup finds SCRAM credentials in the replicated metadata.
func (s *Server) scramLookup(user, mech string) (auth.ScramCredential, bool) {
	if s.broker == nil {
		return auth.ScramCredential{}, false
	}
	return s.broker.ScramCredential(user, mech)
}

// alterUserSCRAMCredentialsDenied answers every user named, once,
// CLUSTER_AUTHORIZATION_FAILED.
func alterUserSCRAMCredentialsDenied(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := map[string]bool{}
	add := func(u string) {
		if !users[u] {
			users[u] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, errClusterAuth
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}
