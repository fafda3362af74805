package sharepart

import "testing"

// FuzzDecode feeds arbitrary bytes to the delta and snapshot decoders: they
// must refuse or accept without panicking, and an accepted snapshot must
// round-trip.
func FuzzDecode(f *testing.F) {
	var d Delta
	d.Init("g", 5)
	d.Set("g", -1, Range{First: 5, Last: 9, State: Acquired, Count: 1, Member: "m", Deadline: 1000})
	d.Reset("h", 3)
	d.Delete("h")
	f.Add(d.Encode())
	r := NewRegistry()
	r.ApplyDelta(&d)
	f.Add(r.Snapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		reg := NewRegistry()
		_ = reg.Apply(b)
		if err := reg.Restore(b); err == nil {
			snap := reg.Snapshot()
			again := NewRegistry()
			if err := again.Restore(snap); err != nil {
				t.Fatalf("snapshot of a restored registry does not restore: %v", err)
			}
			if string(again.Snapshot()) != string(snap) {
				t.Fatal("snapshot round trip differs")
			}
		}
	})
}
