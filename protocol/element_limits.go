package protocol

import "fmt"

// MaxRequestPartitions bounds the topic-partitions (a topic without
// partitions, or a group, counts as one) that one Fetch (its forgotten
// topics included), OffsetCommit, TxnOffsetCommit or OffsetFetch may name; a larger request closes the
// connection before it is decoded, as a Produce over
// strata.produce.max.partitions does. These are the requests whose
// elements kmsg decodes at the highest ratio: a 2-byte topic becomes a
// 64-byte struct, so a 100 MiB frame of empty topics would allocate 3 GiB.
// 100,000 is far above what a consumer group commits at once.
const MaxRequestPartitions = 100000

// checkElementCounts walks the arrays of the requests above without
// allocating (scanner) and refuses one naming more than max elements. A
// body the walk cannot follow is left to kmsg's decoder, which refuses it.
func checkElementCounts(key, version int16, body []byte, limit int) error {
	var n int
	switch key {
	case 8:
		n = countOffsetCommit(body, version, limit)
	case 28:
		n = countTxnOffsetCommit(body, version, limit)
	case 9:
		n = countOffsetFetch(body, version, limit)
	case 1:
		n = countFetch(body, version, limit)
	case 48, 49: // DescribeClientQuotas, AlterClientQuotas (quotas.go)
		n = countClientQuotas(body, key, version, limit)
	default:
		return nil
	}
	if n > limit {
		return fmt.Errorf("%w: request key %d names more than %d topic-partitions", ErrTooManyElements, key, limit)
	}
	return nil
}

// commitTopics counts an OffsetCommit's or TxnOffsetCommit's topics array
// (topic name or, from idVersion, ID; partitions of partition, offset,
// extra fixed bytes, metadata), stopping past max.
func commitTopics(r *scanner, byID bool, fixed, limit int) int {
	topics := r.arrayLen()
	total := 0
	for i := 0; i < topics && r.ok && total <= limit; i++ {
		if byID {
			r.skip(16)
		} else {
			r.nullableString()
		}
		parts := r.arrayLen()
		total += max1(parts)
		for j := 0; j < parts && r.ok && total <= limit; j++ {
			r.skip(fixed)
			r.nullableString()
			r.tags()
		}
		r.tags()
	}
	return max(total, topics)
}

func countOffsetCommit(body []byte, version int16, limit int) int {
	r := &scanner{b: body, flexible: version >= 8, ok: true}
	r.nullableString() // group
	if version >= 1 {
		r.skip(4) // generation
		r.nullableString()
	}
	if version >= 7 {
		r.nullableString() // instance ID
	}
	if version >= 2 && version <= 4 {
		r.skip(8) // retention
	}
	fixed := 4 + 8 // partition, offset
	if version == 1 {
		fixed += 8 // timestamp
	}
	if version >= 6 {
		fixed += 4 // leader epoch
	}
	return commitTopics(r, version >= 10, fixed, limit)
}

func countTxnOffsetCommit(body []byte, version int16, limit int) int {
	r := &scanner{b: body, flexible: version >= 3, ok: true}
	r.nullableString() // transactional ID
	r.nullableString() // group
	r.skip(8 + 2)      // producer ID, epoch
	if version >= 3 {
		r.skip(4) // generation
		r.nullableString()
		r.nullableString() // instance ID
	}
	fixed := 4 + 8
	if version >= 2 {
		fixed += 4
	}
	return commitTopics(r, version >= 6, fixed, limit)
}

func countOffsetFetch(body []byte, version int16, limit int) int {
	r := &scanner{b: body, flexible: version >= 6, ok: true}
	fetchTopics := func(byID bool, total int) int {
		topics := r.arrayLen()
		for i := 0; i < topics && r.ok && total <= limit; i++ {
			if byID {
				r.skip(16)
			} else {
				r.nullableString()
			}
			parts := r.arrayLen()
			total += max1(parts)
			r.skip(4 * parts)
			r.tags()
		}
		return total
	}
	if version <= 7 {
		r.nullableString() // group
		return fetchTopics(false, 0)
	}
	groups := r.arrayLen()
	total := 0
	for i := 0; i < groups && r.ok && total <= limit; i++ {
		total++
		r.nullableString() // group
		if version >= 9 {
			r.nullableString() // member ID
			r.skip(4)          // member epoch
		}
		total = fetchTopics(version >= 10, total)
		r.tags()
	}
	return max(total, groups)
}

func countFetch(body []byte, version int16, limit int) int {
	r := &scanner{b: body, flexible: version >= 12, ok: true}
	if version <= 14 {
		r.skip(4) // replica ID
	}
	r.skip(4 + 4) // max wait, min bytes
	if version >= 3 {
		r.skip(4) // max bytes
	}
	if version >= 4 {
		r.skip(1) // isolation level
	}
	if version >= 7 {
		r.skip(4 + 4) // session ID, epoch
	}
	fixed := 4 + 8 + 4 // partition, fetch offset, partition max bytes
	if version >= 9 {
		fixed += 4 // current leader epoch
	}
	if version >= 12 {
		fixed += 4 // last fetched epoch
	}
	if version >= 5 {
		fixed += 8 // log start offset
	}
	topic := func() {
		if version >= 13 {
			r.skip(16)
		} else {
			r.nullableString()
		}
	}
	total := 0
	topics := r.arrayLen()
	for i := 0; i < topics && r.ok && total <= limit; i++ {
		topic()
		parts := r.arrayLen()
		total += max1(parts)
		for j := 0; j < parts && r.ok && total <= limit; j++ {
			r.skip(fixed)
			r.tags()
		}
		r.tags()
	}
	total = max(total, topics)
	if version < 7 || total > limit {
		return total
	}
	forgotten := r.arrayLen()
	for i := 0; i < forgotten && r.ok && total <= limit; i++ {
		topic()
		parts := r.arrayLen()
		total += max1(parts)
		r.skip(4 * parts)
		r.tags()
	}
	return max(total, forgotten)
}
