package replication

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/internal/quota"
)

func TestClientQuotasApplyAndSnapshot(t *testing.T) {
	alice := quota.Entity{User: quota.Named("alice")}
	defClient := quota.Entity{User: quota.Named("alice"), ClientID: quota.DefaultPart}
	im, err := newImage().Apply(Command{Type: CmdClientQuotas, Quotas: []quota.Change{
		{Entity: alice, Set: map[string]float64{quota.ProducerByteRate: 1024, quota.RequestPercentage: 50}},
		{Entity: defClient, Set: map[string]float64{quota.ConsumerByteRate: 2048}},
	}})
	if err != nil || im.quotas.Len() != 2 {
		t.Fatal(err, im.quotas.Len())
	}
	// Removing the last config removes the entity; removing one not set
	// changes nothing.
	im, err = im.Apply(Command{Type: CmdClientQuotas, Quotas: []quota.Change{
		{Entity: defClient, Remove: []string{quota.ConsumerByteRate, quota.ProducerByteRate}},
	}})
	if err != nil || im.quotas.Len() != 1 || im.quotas.Get(alice)[quota.ProducerByteRate] != 1024 {
		t.Fatal(err, im.quotas.All())
	}
	for _, ch := range [][]quota.Change{
		nil,
		{{Entity: quota.Entity{}, Set: map[string]float64{quota.ProducerByteRate: 1}}},
		{{Entity: alice, Set: map[string]float64{"bogus": 1}}},
		{{Entity: alice, Set: map[string]float64{quota.ProducerByteRate: 1.5}}},
	} {
		if _, err := im.Apply(Command{Type: CmdClientQuotas, Quotas: ch}); !errors.Is(err, errRejected) {
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
	if !bytes.Equal(enc, enc2) || back.quotas.Get(alice)[quota.RequestPercentage] != 50 {
		t.Fatalf("round trip:\n%s\n%s", enc, enc2)
	}
}
