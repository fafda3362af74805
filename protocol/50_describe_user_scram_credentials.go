package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
)

// DescribeUserScramCredentials: v0
//
// Behaviour:
//   - Lists the users with SCRAM credentials in the replicated metadata
//     (replication/metadata_scram.go), each with its mechanisms and iteration
//     counts (never a salt or key); a null or empty user list lists
//     every user.
//   - A named user without credentials is RESOURCE_NOT_FOUND; a name
//     given twice is DUPLICATE_RESOURCE (both per user, as Kafka).
//
// With ACLs on it needs DESCRIBE on the cluster (acl_rules.go), as Kafka.
func init() {
	register(50, 0, 0, concurrent, (*Server).handleDescribeUserScramCredentials,
		needsCluster(acl.Describe))
}

func (s *Server) handleDescribeUserScramCredentials(_ context.Context, req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	var names []string
	seen := map[string]int{}
	for _, u := range req.Users {
		seen[u.Name]++
		if seen[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	if len(req.Users) > 0 && len(names) == 0 {
		return resp, nil
	}
	found := map[string]bool{}
	for _, u := range s.broker.ScramUsers(names) {
		if seen[u.User] > 1 {
			continue
		}
		found[u.User] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.User
		for i, m := range u.Mechanisms {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = auth.ScramTypeFromMechanism(m), u.Iterations[i]
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, r)
	}
	for _, n := range names {
		if found[n] {
			continue
		}
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = n
		if seen[n] > 1 {
			r.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + n
			r.ErrorMessage = &msg
		} else {
			r.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist: " + n
			r.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
