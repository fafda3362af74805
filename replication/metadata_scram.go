package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/strata-io/strata/internal/auth"
)

// SCRAM credentials (AlterUserScramCredentials, DescribeUserScramCredentials)
// live in the replicated metadata, so every broker authenticates every
// user: CmdScramCredentials upserts and deletes them. Only the salt, the
// iteration count and the derived stored and server keys are kept (RFC
// 5802), never a password.

// CmdScramCredentials changes SCRAM credentials (Command.Scram). 40:
// numbers below are left for other commands in flight.
const CmdScramCredentials CommandType = 40

// Limits on the credentials held.
const (
	maxScramUsers   = 100000
	maxScramUserLen = 1024
)

// ScramChange is one upsert (Credential set) or deletion (nil) of a
// user's credential for a mechanism.
type ScramChange struct {
	User       string                `json:"user"`
	Mechanism  string                `json:"mechanism"`
	Credential *auth.ScramCredential `json:"credential,omitempty"`
}

// scramKey names one credential in image.scram.
type scramKey struct{ user, mech string }

func checkScramCredential(c auth.ScramCredential) error {
	n := 32
	if c.Mechanism == auth.MechScramSHA512 {
		n = 64
	} else if c.Mechanism != auth.MechScramSHA256 {
		return fmt.Errorf("unknown mechanism %q", c.Mechanism)
	}
	if len(c.StoredKey) != n || len(c.ServerKey) != n || len(c.Salt) == 0 || len(c.Salt) > 1024 ||
		c.Iterations < auth.MinScramIterations || c.Iterations > auth.MaxScramIterations {
		return errors.New("malformed credential")
	}
	return nil
}

// applyScram applies a CmdScramCredentials command to next (a clone).
func (next *image) applyScram(changes []ScramChange) error {
	if len(changes) == 0 {
		return errors.New("no changes")
	}
	m := make(map[scramKey]auth.ScramCredential, len(next.scram)+len(changes))
	for k, v := range next.scram {
		m[k] = v
	}
	for _, ch := range changes {
		if ch.User == "" || len(ch.User) > maxScramUserLen {
			return fmt.Errorf("bad user name of %d bytes", len(ch.User))
		}
		k := scramKey{ch.User, ch.Mechanism}
		if ch.Credential == nil {
			delete(m, k)
			continue
		}
		if ch.Credential.Mechanism != ch.Mechanism {
			return errors.New("mechanism mismatch")
		}
		if err := checkScramCredential(*ch.Credential); err != nil {
			return fmt.Errorf("user %q: %v", ch.User, err)
		}
		m[k] = *ch.Credential
	}
	if len(m) > maxScramUsers*2 {
		return fmt.Errorf("more than %d credentials", maxScramUsers*2)
	}
	next.scram = m
	return nil
}

// scramSnapshot lists the credentials for a snapshot, sorted.
func (im *image) scramSnapshot() []ScramChange {
	out := make([]ScramChange, 0, len(im.scram))
	for k, v := range im.scram {
		v := v
		out = append(out, ScramChange{User: k.user, Mechanism: k.mech, Credential: &v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	return out
}

// restoreScram loads a snapshot's credentials.
func (im *image) restoreScram(list []ScramChange) error {
	if len(list) == 0 {
		return nil
	}
	if err := im.applyScram(list); err != nil {
		return fmt.Errorf("%w: scram credentials: %v", errBadSnapshot, err)
	}
	return nil
}

// ScramCredential returns user's credential for mech.
func (q *metadataQuorum) ScramCredential(user, mech string) (auth.ScramCredential, bool) {
	c, ok := q.img.Load().scram[scramKey{user, mech}]
	return c, ok
}

// ScramUser is one user's mechanisms and iteration counts.
type ScramUser struct {
	User       string
	Mechanisms []string
	Iterations []int32
}

// ScramUsers lists the users with credentials, sorted; only the named
// ones when names is not empty (missing names are left out).
func (q *metadataQuorum) ScramUsers(names []string) []ScramUser {
	img := q.img.Load()
	by := map[string]int{}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var keys []scramKey
	for k := range img.scram {
		if len(want) == 0 || want[k.user] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].user != keys[j].user {
			return keys[i].user < keys[j].user
		}
		return keys[i].mech < keys[j].mech
	})
	var out []ScramUser
	for _, k := range keys {
		i, ok := by[k.user]
		if !ok {
			i = len(out)
			out = append(out, ScramUser{User: k.user})
			by[k.user] = i
		}
		u := &out[i]
		u.Mechanisms = append(u.Mechanisms, k.mech)
		u.Iterations = append(u.Iterations, img.scram[k].Iterations)
	}
	return out
}

// AlterScramCredentials commits changes through the metadata quorum.
func (q *metadataQuorum) AlterScramCredentials(ctx context.Context, changes []ScramChange) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, err := q.commitLocked(Command{Type: CmdScramCredentials, Scram: changes}); err != nil {
		return err
	}
	q.logger.Info("SCRAM credentials changed", "changes", len(changes))
	return nil
}
