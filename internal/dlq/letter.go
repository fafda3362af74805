// Package dlq reads share groups' dead-letter topics and redrives their
// letters: it re-publishes the original records (key, value and headers)
// to their source topic or another, each once, resumably. It is the code
// behind `strata dlq list|inspect|redrive` and is meant to be called by
// any other front end (a console) too.
//
// Progress. A redrive is a transactional producer (transactional ID
// TransactionalID(group)); each batch of re-published records and the
// cursor recording them done are committed in one transaction, so a run
// that dies halfway (SIGKILL) leaves either the batch and its cursor or
// neither, and the next run (whose InitProducerId aborts the dead run's
// open transaction) moves nothing twice. The cursor is one consumer
// group per reason, CursorGroup(group, reason), committed on the
// dead-letter topic's partitions: its offset is the first letter not
// done, and its metadata lists ranges done above it (letters left behind
// below them: refused by the redrive limit, or older than --since). A
// cursor per reason lets `--reason rejected` today and
// `--reason max-deliveries` tomorrow each take their own letters.
//
// The loop guard. Every re-published record carries
// HeaderRedriveCount (the count it came with plus one); a letter whose
// record was already redriven Limit times is refused and stays. Strata's
// dead-letter writer copies the original headers into the letter (with
// errors.deadletterqueue.copy.record.enable), so the count survives the
// round trip; without the copy the record is read back from its source,
// whose copy carries it.
package dlq

import (
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers: Kafka's (KIP-1191) and Strata's on every dead letter, and the
// redrive's on every re-published record.
const (
	HeaderTopic         = "__dlq.errors.topic"
	HeaderPartition     = "__dlq.errors.partition"
	HeaderOffset        = "__dlq.errors.offset"
	HeaderGroup         = "__dlq.errors.group"
	HeaderDeliveryCount = "__dlq.errors.delivery.count"
	HeaderReason        = "strata.dlq.reason"
	HeaderFirstMs       = "strata.dlq.first.delivery.ms"
	HeaderLastMs        = "strata.dlq.last.delivery.ms"
	HeaderMember        = "strata.dlq.member.id"

	// HeaderRedriveCount is how many times the record was redriven.
	HeaderRedriveCount = "strata.redrive.count"
	// HeaderRedriveFrom names the letter a re-published record came
	// from: "dlq-topic/partition/offset".
	HeaderRedriveFrom = "strata.redrive.from"
)

// DefaultLimit is the redrive limit when none is given: a record
// redriven this many times is refused.
const DefaultLimit = 3

// Reasons are the strata.dlq.reason values a cursor exists for; a letter
// with another (or none) counts as "other".
var Reasons = []string{"max-deliveries", "rejected", "ttl-expired", "redrive-limit", "topic-deleted", "other"}

// CursorGroup is the consumer group whose committed offsets on the
// dead-letter topic record group's redrive progress for reason.
func CursorGroup(group, reason string) string { return "strata-dlq-redrive." + group + "." + reason }

// TransactionalID is the transactional ID of group's redrives: one at a
// time; a second run fences the first.
func TransactionalID(group string) string { return "strata-dlq-redrive." + group }

// Letter is one dead letter read back.
type Letter struct {
	Partition int32 // in the dead-letter topic
	Offset    int64
	Time      time.Time // when it was written
	Reason    string    // one of Reasons

	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	Group           string
	DeliveryCount   int
	Member          string
	FirstDelivery   time.Time // zero: unknown
	LastDelivery    time.Time

	// Redrives is the record's HeaderRedriveCount.
	Redrives int
	// Key, Value and Headers are the original record's as copied into
	// the letter (Headers without the dead-letter headers); Copied is
	// false when the letter holds neither key nor value (copy disabled,
	// or a record without either), and the record is read from its
	// source.
	Key, Value []byte
	Headers    []kgo.RecordHeader
	Copied     bool
}

// Source is "topic/partition" of the letter's record.
func (l *Letter) Source() string {
	return l.SourceTopic + "/" + strconv.Itoa(int(l.SourcePartition))
}

// dlqHeader reports whether a header belongs to the dead letter rather
// than to the original record.
func dlqHeader(k string) bool {
	return strings.HasPrefix(k, "__dlq.errors.") || strings.HasPrefix(k, "strata.dlq.")
}

// ParseLetter reads a dead-letter record.
func ParseLetter(r *kgo.Record) Letter {
	l := Letter{Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp, SourcePartition: -1, SourceOffset: -1,
		Key: r.Key, Value: r.Value, Copied: r.Key != nil || r.Value != nil}
	ms := func(v string) time.Time {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderTopic:
			l.SourceTopic = v
		case HeaderPartition:
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				l.SourcePartition = int32(n)
			}
		case HeaderOffset:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				l.SourceOffset = n
			}
		case HeaderGroup:
			l.Group = v
		case HeaderDeliveryCount:
			l.DeliveryCount, _ = strconv.Atoi(v)
		case HeaderReason:
			l.Reason = v
		case HeaderFirstMs:
			l.FirstDelivery = ms(v)
		case HeaderLastMs:
			l.LastDelivery = ms(v)
		case HeaderMember:
			l.Member = v
		}
		if dlqHeader(h.Key) {
			continue
		}
		if h.Key == HeaderRedriveCount {
			l.Redrives, _ = strconv.Atoi(v)
		}
		l.Headers = append(l.Headers, h)
	}
	l.Reason = reasonOf(l.Reason)
	return l
}

func reasonOf(s string) string {
	for _, r := range Reasons {
		if r == s {
			return s
		}
	}
	return "other"
}

// redriveCount reads HeaderRedriveCount from a source record's headers.
func redriveCount(hs []kgo.RecordHeader) int {
	for _, h := range hs {
		if h.Key == HeaderRedriveCount {
			n, _ := strconv.Atoi(string(h.Value))
			return n
		}
	}
	return 0
}
