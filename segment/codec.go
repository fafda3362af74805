package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrUndecodable is returned when a batch's records cannot be opened: a
// codec error, a decompressed size over the caller's limit, or records
// that do not parse.
var ErrUndecodable = errors.New("segment: cannot decode record batch")

// ErrRecordsTooLarge is returned (wrapped with ErrUndecodable) when a
// batch's records decompress to more than the caller's limit (Kafka's
// MESSAGE_TOO_LARGE, on which the Java producer splits its batch).
var ErrRecordsTooLarge = errors.New("segment: decompressed records too large")

// DecompressRatio and MaxRecordsBytes bound what a produced batch may
// decompress to: DecompressLimit(max.message.bytes).
const DecompressRatio = 32

// DecompressLimit is the largest records area a batch of a topic with
// max.message.bytes maxMessageBytes may decompress to: DecompressRatio
// times max.message.bytes, between 1 MiB and MaxRecordsBytes (a batch is
// at most MaxBatchSize, so an uncompressed one always fits).
func DecompressLimit(maxMessageBytes int) int {
	if maxMessageBytes <= 0 {
		maxMessageBytes = 1<<20 + 12
	}
	return int(max(min(int64(maxMessageBytes)*DecompressRatio, MaxRecordsBytes), 1<<20))
}

// Codecs (the low three bits of a batch's attributes, Header.Compression;
// on-disk format).
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// xerialMagic starts a snappy payload in the Java client's xerial framing
// (magic, then version and compatible-version int32s, then blocks of a
// big-endian int32 length and a raw snappy block).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var (
	zstdDecMu   sync.Mutex
	zstdDecs    = map[int]*zstd.Decoder{} // by limit class (MiB)
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

// zstdMinMemory is the least a zstd decoder's output may grow to before
// it stops: a frame's window must fit in it, and streaming encoders (the
// Java producer's) declare windows of 2-8 MiB up to level 19 whatever the
// batch's size.
const zstdMinMemory = 8 << 20

// zstdDecoder returns a shared decoder whose output stops at limit
// rounded up to a MiB (at least zstdMinMemory): the decoder refuses a
// frame whose declared content size or window is larger, and stops
// growing its output there, so a small frame cannot make it allocate much
// more. Limits are at most MaxRecordsBytes, so there are at most 57 such
// decoders.
func zstdDecoder(limit int) (*zstd.Decoder, error) {
	class := max((min(limit, MaxRecordsBytes)+1<<20-1)&^(1<<20-1), zstdMinMemory)
	zstdDecMu.Lock()
	defer zstdDecMu.Unlock()
	if d := zstdDecs[class]; d != nil {
		return d, nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(class)))
	if err != nil {
		return nil, err
	}
	zstdDecs[class] = d
	return d, nil
}

// Decompress returns the records area of a batch compressed with codec,
// refusing to produce more than limit bytes (ErrRecordsTooLarge). It is
// the one place records are decompressed. Memory is bounded by about
// twice limit whatever data claims: output grows from what is decoded
// (sizes a codec declares are checked against limit first).
func Decompress(codec int, data []byte, limit int) ([]byte, error) {
	bad := func(err error) ([]byte, error) {
		if errors.Is(err, ErrRecordsTooLarge) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("%w: %w: codec %d: %v", ErrUndecodable, ErrRecordsTooLarge, codec, err)
		}
		return nil, fmt.Errorf("%w: codec %d: %v", ErrUndecodable, codec, err)
	}
	tooLarge := func() ([]byte, error) {
		return bad(fmt.Errorf("%w: more than %d bytes", ErrRecordsTooLarge, limit))
	}
	readAll := func(r io.Reader) ([]byte, error) {
		out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return bad(err)
		}
		if len(out) > limit {
			return tooLarge()
		}
		return out, nil
	}
	switch codec {
	case CodecNone:
		return data, nil
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return bad(err)
		}
		defer r.Close()
		return readAll(r)
	case CodecSnappy:
		if bytes.HasPrefix(data, xerialMagic) && len(data) >= 16 {
			var out []byte
			rest := data[16:]
			for len(rest) > 0 {
				if len(rest) < 4 {
					return bad(errors.New("truncated xerial block"))
				}
				n := int(binary.BigEndian.Uint32(rest))
				rest = rest[4:]
				if n < 0 || n > len(rest) {
					return bad(errors.New("xerial block length past the data"))
				}
				dl, err := s2.DecodedLen(rest[:n])
				if err != nil {
					return bad(err)
				}
				if len(out)+dl > limit {
					return tooLarge()
				}
				blk, err := s2.Decode(nil, rest[:n])
				if err != nil {
					return bad(err)
				}
				out = append(out, blk...)
				rest = rest[n:]
			}
			return out, nil
		}
		dl, err := s2.DecodedLen(data)
		if err != nil {
			return bad(err)
		}
		if dl > limit {
			return tooLarge()
		}
		out, err := s2.Decode(nil, data)
		if err != nil {
			return bad(err)
		}
		return out, nil
	case CodecLZ4:
		return readAll(lz4.NewReader(bytes.NewReader(data)))
	case CodecZstd:
		var fh zstd.Header
		if err := fh.Decode(data); err == nil && fh.HasFCS && fh.FrameContentSize > uint64(limit) {
			return tooLarge()
		}
		dec, err := zstdDecoder(limit)
		if err != nil {
			return bad(err)
		}
		out, err := dec.DecodeAll(data, nil)
		if err != nil {
			return bad(err)
		}
		if len(out) > limit {
			return tooLarge()
		}
		return out, nil
	}
	return bad(errors.New("unknown codec"))
}

// Compress encodes a records area with codec (raw snappy blocks, as
// franz-go and librdkafka write; LZ4 frames; default levels).
func Compress(codec int, data []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return data, nil
	case CodecGzip:
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	case CodecSnappy:
		return s2.EncodeSnappy(nil, data), nil
	case CodecLZ4:
		var b bytes.Buffer
		w := lz4.NewWriter(&b)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	case CodecZstd:
		zstdEncOnce.Do(func() {
			zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		})
		if zstdEnc == nil {
			return nil, errors.New("segment: no zstd encoder")
		}
		return zstdEnc.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("segment: unknown codec %d", codec)
}
