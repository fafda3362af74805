package replication

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/internal/acl"
)

func TestACLsApplyAndSnapshot(t *testing.T) {
	read := acl.Binding{ResourceType: acl.Topic, ResourceName: "t", PatternType: acl.Literal,
		Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow}
	deny := read
	deny.Permission, deny.PatternType, deny.ResourceName = acl.Deny, acl.Prefixed, "secret-"
	im, err := newImage().Apply(Command{Type: CmdACLs, ACLs: &ACLChange{Create: []acl.Binding{read, deny, read}}})
	if err != nil || im.acls.Len() != 2 {
		t.Fatal(err, im.acls.Len())
	}
	// Removing a binding that is gone changes nothing and is no error.
	gone := read
	gone.Host = "10.0.0.1"
	im, err = im.Apply(Command{Type: CmdACLs, ACLs: &ACLChange{Delete: []acl.Binding{read, gone}}})
	if err != nil || im.acls.Len() != 1 || !im.acls.Has(deny) {
		t.Fatal(err, im.acls.All())
	}
	bad := read
	bad.Principal = "alice"
	for _, ch := range []*ACLChange{nil, {}, {Create: []acl.Binding{bad}}} {
		if _, err := im.Apply(Command{Type: CmdACLs, ACLs: ch}); !errors.Is(err, errRejected) {
			t.Fatalf("%+v: %v", ch, err)
		}
	}
	enc, err := encodeImage(im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeImage(enc)
	if err != nil {
		t.Fatal(err)
	}
	enc2, _ := encodeImage(back)
	if !bytes.Equal(enc, enc2) || !back.acls.Has(deny) {
		t.Fatalf("round trip:\n%s\n%s", enc, enc2)
	}
}
