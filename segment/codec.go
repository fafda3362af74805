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
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

// Decompress returns the records area of a batch compressed with codec,
// refusing to produce more than limit bytes. It is the one place records
// are decompressed.
func Decompress(codec int, data []byte, limit int) ([]byte, error) {
	bad := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("%w: codec %d: %v", ErrUndecodable, codec, err)
	}
	readAll := func(r io.Reader) ([]byte, error) {
		out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return bad(err)
		}
		if len(out) > limit {
			return bad(fmt.Errorf("decompressed records exceed %d bytes", limit))
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
					return bad(fmt.Errorf("decompressed records exceed %d bytes", limit))
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
			return bad(fmt.Errorf("decompressed records exceed %d bytes", limit))
		}
		out, err := s2.Decode(nil, data)
		if err != nil {
			return bad(err)
		}
		return out, nil
	case CodecLZ4:
		return readAll(lz4.NewReader(bytes.NewReader(data)))
	case CodecZstd:
		zstdDecOnce.Do(func() {
			zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
		})
		if zstdDec == nil {
			return bad(errors.New("no zstd decoder"))
		}
		out, err := zstdDec.DecodeAll(data, nil)
		if err != nil {
			return bad(err)
		}
		if len(out) > limit {
			return bad(fmt.Errorf("decompressed records exceed %d bytes", limit))
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
