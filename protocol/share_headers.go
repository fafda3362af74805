package protocol

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/sharepart"
)

// A record's own times for share groups, from its headers: strata.ttl.ms
// (a time-to-live overriding the group's strata.share.record.ttl.ms,
// counted from the record's timestamp; 0 = none) and
// strata.deliver.after.ms (epoch milliseconds before which share
// consumers do not see it). Acquisition otherwise reads batch headers
// only (records go out by sendfile), so it reads the records of a batch
// it acquires for the first time only when the group has
// strata.share.record.headers.enable (the default), and then opens a
// record only when the batch's bytes contain the headers' common prefix:
// one pass of bytes.Index over an uncompressed batch; a compressed batch
// is decompressed first.

const (
	hdrRecordTTL   = "strata.ttl.ms"
	hdrRecordAfter = "strata.deliver.after.ms"
)

// recordTimesPrefix is what both header names start with.
var recordTimesPrefix = []byte("strata.")

// recordTimes returns the records of the stored batch b (header
// included) that carry strata.ttl.ms or strata.deliver.after.ms, in
// offset order; nil when none does or the batch does not open (it is
// then delivered as it is, as every batch was before).
func recordTimes(b []byte) []sharepart.RecordTimes {
	h, err := segment.ParseHeader(b)
	if err != nil || h.Size() != int64(len(b)) || h.IsControl() {
		return nil
	}
	area := b[segment.HeaderSize:]
	if h.Compression() == segment.CodecNone {
		if !bytes.Contains(area, recordTimesPrefix) {
			return nil
		}
	} else {
		if area, err = segment.Decompress(h.Compression(), area, segment.MaxRecordsBytes); err != nil || !bytes.Contains(area, recordTimesPrefix) {
			return nil
		}
	}
	var out []sharepart.RecordTimes
	pos := 0
	for i := int32(0); i < h.NumRecords && pos < len(area); i++ {
		l, w := binary.Varint(area[pos:])
		if w <= 0 || l < 1 || l > int64(len(area)-pos-w) {
			return out
		}
		body := area[pos+w : pos+w+int(l)]
		pos += w + int(l)
		rt, ok := parseRecordTimes(body, &h)
		if ok {
			out = append(out, rt)
		}
	}
	return out
}

// parseRecordTimes reads one record's body (after its length) and
// returns its times when it carries either header.
func parseRecordTimes(body []byte, h *segment.Header) (sharepart.RecordTimes, bool) {
	p := 1 // attributes
	bad := false
	varint := func() int64 {
		if bad || p >= len(body) {
			bad = true
			return 0
		}
		v, w := binary.Varint(body[p:])
		if w <= 0 {
			bad = true
			return 0
		}
		p += w
		return v
	}
	skip := func(n int64) []byte {
		if bad || n < 0 || n > int64(len(body)-p) {
			if n != -1 {
				bad = true
			}
			return nil
		}
		s := body[p : p+int(n)]
		p += int(n)
		return s
	}
	tsDelta := varint()
	offDelta := varint()
	skip(varint()) // key
	skip(varint()) // value
	nh := varint()
	rt := sharepart.RecordTimes{Offset: h.BaseOffset + offDelta, TsMs: h.BaseTimestamp + tsDelta, TTLMs: -1}
	if h.IsLogAppendTime() {
		rt.TsMs = h.MaxTimestamp
	}
	found := false
	for j := int64(0); j < nh && !bad; j++ {
		k := skip(varint())
		v := skip(varint())
		if bad || len(k) < len(recordTimesPrefix) || !bytes.HasPrefix(k, recordTimesPrefix) {
			continue
		}
		switch string(k) {
		case hdrRecordTTL:
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil && n >= 0 {
				rt.TTLMs, found = n, true
			}
		case hdrRecordAfter:
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil && n > 0 {
				rt.AfterMs, found = n, true
			}
		}
	}
	return rt, found && !bad
}
