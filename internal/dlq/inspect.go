package dlq

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Depth is what waits in a share group's dead-letter topic: the letters
// no redrive has taken yet.
type Depth struct {
	Group string
	Topic string // the dead-letter topic
	// Letters is the letters not yet redriven (nor skipped as gone);
	// Total is every letter in the topic now.
	Letters, Total int
	// Oldest is when the oldest waiting letter was written (zero: none).
	Oldest   time.Time
	ByReason map[string]int
	BySource map[string]int
	// Sample is the oldest waiting letters (Inspect only), at most the
	// sample asked for.
	Sample []Letter
}

// Age is how long the oldest waiting letter has waited at now.
func (d *Depth) Age(now time.Time) time.Duration {
	if d.Oldest.IsZero() {
		return 0
	}
	return now.Sub(d.Oldest)
}

// Inspect reads group's dead-letter topic (topic "" = the group's
// errors.deadletterqueue.topic.name) and counts the letters waiting,
// only reason's when reason is set; sample bounds Depth.Sample.
func Inspect(ctx context.Context, seeds []string, group, topic, reason string, sample int, opts ...kgo.Opt) (*Depth, error) {
	if reason != "" && reasonOf(reason) != reason {
		return nil, fmt.Errorf("unknown reason %q", reason)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if topic == "" {
		if topic, err = GroupDLQTopic(ctx, cl, group); err != nil {
			return nil, err
		}
		if topic == "" {
			return nil, fmt.Errorf("share group %s has no dead-letter topic (errors.deadletterqueue.topic.name)", group)
		}
	}
	d := &Depth{Group: group, Topic: topic, ByReason: map[string]int{}, BySource: map[string]int{}}
	cursors, err := loadCursors(ctx, adm, group, topic, Reasons)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("dead-letter topic %s: %w", topic, err)
	}
	var parts []int32
	ends.Each(func(l kadm.ListedOffset) { parts = append(parts, l.Partition) })
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		end, _ := ends.Lookup(topic, p)
		start, _ := starts.Lookup(topic, p)
		d.Total += int(end.Offset - start.Offset)
		from := end.Offset
		for _, r := range Reasons {
			from = min(from, cursors[r][p].low)
		}
		from = max(from, start.Offset)
		err := scanPartition(ctx, seeds, opts, topic, p, from, end.Offset, func(rec *kgo.Record) (bool, error) {
			l := ParseLetter(rec)
			if cursors[l.Reason][p].has(l.Offset) || (reason != "" && l.Reason != reason) {
				return true, nil
			}
			d.Letters++
			d.ByReason[l.Reason]++
			d.BySource[l.Source()]++
			if d.Oldest.IsZero() || l.Time.Before(d.Oldest) {
				d.Oldest = l.Time
			}
			if len(d.Sample) < sample {
				l.Key, l.Value = trim(l.Key), trim(l.Value)
				d.Sample = append(d.Sample, l)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

func trim(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// List is Inspect (without samples) of every share group that has a
// dead-letter topic.
func List(ctx context.Context, seeds []string, opts ...kgo.Opt) ([]*Depth, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return nil, err
	}
	var out []*Depth
	for _, g := range listed.Sorted() {
		if g.GroupType != "share" {
			continue
		}
		topic, err := GroupDLQTopic(ctx, cl, g.Group)
		if err != nil {
			return nil, err
		}
		if topic == "" {
			continue
		}
		d, err := Inspect(ctx, seeds, g.Group, topic, "", 0, opts...)
		if err != nil {
			d = &Depth{Group: g.Group, Topic: topic, Letters: -1} // the topic cannot be read (missing yet)
		}
		out = append(out, d)
	}
	return out, nil
}
