package protocol

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeLogDirs(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("ld-a", 2)
	c.createTopic("ld-b", 1)
	ctx := testCtx(t)
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 20 {
		for _, r := range []*kgo.Record{{Topic: "ld-a", Partition: 0, Value: make([]byte, 100+i)}, {Topic: "ld-b", Value: []byte("b")}} {
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir, err := filepath.Abs(c.b.Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	size := func(topic string, partition int32) int64 {
		p, err := c.b.Partition(topic, partition)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, s := range p.Segments() {
			n += s.Size
		}
		return n
	}
	adm := c.admin()
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs, ok := all[1]
	if !ok || len(all) != 1 || len(dirs) != 1 {
		t.Fatalf("want one broker with one directory: %+v", all)
	}
	d, ok := dirs[dir]
	if !ok || d.Err != nil {
		t.Fatalf("directory %s: %+v", dir, dirs)
	}
	if d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
		t.Fatalf("total %d usable %d", d.TotalBytes, d.UsableBytes)
	}
	for _, tp := range []struct {
		topic     string
		partition int32
		nonEmpty  bool
	}{{"ld-a", 0, true}, {"ld-a", 1, false}, {"ld-b", 0, true}} {
		p, ok := d.Topics.Lookup(tp.topic, tp.partition)
		if !ok {
			t.Fatalf("%s-%d not described: %+v", tp.topic, tp.partition, d.Topics)
		}
		if want := size(tp.topic, tp.partition); p.Size != want || (p.Size > 0) != tp.nonEmpty || p.OffsetLag != 0 || p.IsFuture {
			t.Errorf("%s-%d: size %d (want %d) lag %d future %v", tp.topic, tp.partition, p.Size, want, p.OffsetLag, p.IsFuture)
		}
	}
	if d.Size() != size("ld-a", 0)+size("ld-b", 0) {
		t.Errorf("directory size %d", d.Size())
	}

	// Named partitions (kgo sends each to the brokers holding it, so
	// unknown names are tried raw below).
	var set kadm.TopicsSet
	set.Add("ld-a", 1)
	some, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	d = some[1][dir]
	if _, ok := d.Topics.Lookup("ld-a", 1); !ok || len(d.Topics) != 1 || len(d.Topics["ld-a"]) != 1 {
		t.Fatalf("named partitions: %+v", d.Topics)
	}

	// Raw: v0 has no sizes of the volume; a partition named twice (and a
	// topic named twice) is answered once; partitions without a log here
	// are left out.
	rc := dialRaw(t, c.addr)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(v)
		for range 2 {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic = "ld-a"
			rt.Partitions = []int32{0, 0, 1, 7, -1}
			req.Topics = append(req.Topics, rt)
		}
		unknown := kmsg.NewDescribeLogDirsRequestTopic()
		unknown.Topic, unknown.Partitions = "nope", []int32{0}
		req.Topics = append(req.Topics, unknown)
		resp := rc.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
		if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != dir || resp.ErrorCode != 0 || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		rd := resp.Dirs[0]
		if len(rd.Topics) != 1 || len(rd.Topics[0].Partitions) != 2 ||
			rd.Topics[0].Partitions[0].Partition != 0 || rd.Topics[0].Partitions[0].Size != size("ld-a", 0) {
			t.Fatalf("v%d: topics %+v", v, rd.Topics)
		}
		if (v >= 4) != (rd.TotalBytes > 0) {
			t.Fatalf("v%d: total bytes %d", v, rd.TotalBytes)
		}
	}
}
