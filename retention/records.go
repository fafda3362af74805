package retention

import (
	"crypto/sha256"
	"fmt"

	"github.com/strata-io/strata/segment"
)

// ErrCorruptBatch is returned when the cleaner cannot open a stored batch
// (a codec error, or records that do not parse); the cleaner then leaves
// the partition as it is. It is segment's error for a batch that does not
// open, so that errors.Is holds whichever package reported it.
var ErrCorruptBatch = segment.ErrUndecodable

// keyHash identifies a record key in the cleaner's offset map (Kafka's
// SkimpyOffsetMap keeps an MD5 of the key; SHA-256 truncated to 16 bytes
// makes a collision, which would drop a live record, not a concern).
type keyHash [16]byte

func hashKey(k []byte) keyHash {
	sum := sha256.Sum256(k)
	var h keyHash
	copy(h[:], sum[:16])
	return h
}

// rebuildBatch writes a batch holding only the kept records of the stored
// batch whose header is h: the header is kept (base offset, last offset
// delta, timestamps, producer fields: offsets keep their gaps and producer
// state stays derivable), the records count, length and CRC are
// recomputed, and the records are compressed again with the batch's codec.
func rebuildBatch(h segment.Header, kept []segment.Record) ([]byte, error) {
	var area []byte
	for _, r := range kept {
		area = append(area, r.Raw...)
	}
	body, err := segment.Compress(h.Compression(), area)
	if err != nil {
		return nil, fmt.Errorf("%w: recompress: %v", ErrCorruptBatch, err)
	}
	h.NumRecords = int32(len(kept))
	return segment.AppendBatch(make([]byte, 0, segment.HeaderSize+len(body)), h, body), nil
}
