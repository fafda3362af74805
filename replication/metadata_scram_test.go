package replication

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/internal/auth"
)

func TestScramCredentialsApplyAndSnapshot(t *testing.T) {
	c256, _ := auth.NewScramCredential(auth.MechScramSHA256, "pw", []byte("salt"), 4096)
	c512, _ := auth.NewScramCredential(auth.MechScramSHA512, "pw", []byte("salt"), 8192)
	im := newImage()
	im, err := im.Apply(Command{Type: CmdScramCredentials, Scram: []ScramChange{
		{User: "bob", Mechanism: auth.MechScramSHA256, Credential: &c256},
		{User: "bob", Mechanism: auth.MechScramSHA512, Credential: &c512},
		{User: "al", Mechanism: auth.MechScramSHA256, Credential: &c256},
	}})
	if err != nil || len(im.scram) != 3 {
		t.Fatal(err, len(im.scram))
	}
	im, err = im.Apply(Command{Type: CmdScramCredentials, Scram: []ScramChange{{User: "al", Mechanism: auth.MechScramSHA256}}})
	if err != nil || len(im.scram) != 2 {
		t.Fatal(err, len(im.scram))
	}
	bad := c256
	bad.Iterations = 10
	for _, c := range [][]ScramChange{
		nil,
		{{User: "", Mechanism: auth.MechScramSHA256, Credential: &c256}},
		{{User: "x", Mechanism: auth.MechScramSHA512, Credential: &c256}},
		{{User: "x", Mechanism: auth.MechScramSHA256, Credential: &bad}},
	} {
		if _, err := im.Apply(Command{Type: CmdScramCredentials, Scram: c}); !errors.Is(err, errRejected) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	enc, err := encodeImage(im)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc, []byte(`"pw"`)) {
		t.Fatal("password in the snapshot")
	}
	back, err := decodeImage(enc)
	if err != nil {
		t.Fatal(err)
	}
	enc2, _ := encodeImage(back)
	if !bytes.Equal(enc, enc2) || len(back.scram) != 2 {
		t.Fatalf("round trip:\n%s\n%s", enc, enc2)
	}
}
