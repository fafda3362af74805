package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-io/strata/segment"
)

// debugCommand runs `strata debug <subcommand>`.
func debugCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, "Usage: strata debug dump-segment [--max-batches N] FILE.log\n")
		if len(args) == 0 {
			return exitConfig
		}
		return exitOK
	}
	switch args[0] {
	case "dump-segment":
		return dumpSegmentCommand(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "strata debug: unknown command %q\n", args[0])
	return exitConfig
}

func dumpSegmentCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dump-segment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxBatches := fs.Int64("max-batches", 0, "stop after this many batches (0 = all)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: strata debug dump-segment [--max-batches N] FILE.log\n\n"+
			"Prints each record batch header of a segment file, like kafka-dump-log.\n"+
			"Exit status 1 when a batch fails its CRC or the file ends in a torn or corrupt tail.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitConfig
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitError
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "Dumping %s\n", filepath.Base(fs.Arg(0)))
	ok, err := dumpSegment(f, fi.Size(), *maxBatches, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitError
	}
	if !ok {
		return exitError
	}
	return exitOK
}

var codecNames = map[int]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

// dumpSegment prints one line per batch header in r (size bytes). It
// reads a batch at a time (at most segment.MaxBatchSize) and stops at the
// first header that does not parse or a batch that runs past the end; ok
// is false if that happened or a CRC did not match.
func dumpSegment(r io.ReaderAt, size, maxBatches int64, w io.Writer) (ok bool, err error) {
	ok = true
	var hdr [segment.HeaderSize]byte
	var buf []byte
	pos := int64(0)
	for n := int64(0); pos < size && (maxBatches <= 0 || n < maxBatches); n++ {
		if size-pos < segment.HeaderSize {
			fmt.Fprintf(w, "position: %d: %d trailing bytes, shorter than a batch header (torn tail)\n", pos, size-pos)
			return false, nil
		}
		if _, err := r.ReadAt(hdr[:], pos); err != nil {
			return false, fmt.Errorf("read at %d: %w", pos, err)
		}
		h, perr := segment.ParseHeader(hdr[:])
		if perr != nil {
			if allZero(hdr[:]) {
				fmt.Fprintf(w, "position: %d: zero bytes from here (preallocated or torn tail)\n", pos)
			} else {
				fmt.Fprintf(w, "position: %d: %v; stopping\n", pos, perr)
			}
			return false, nil
		}
		bsize := h.Size()
		if pos+bsize > size {
			fmt.Fprintf(w, "position: %d: batch of %d bytes runs past the end of the file (torn tail)\n", pos, bsize)
			return false, nil
		}
		if int64(cap(buf)) < bsize {
			buf = make([]byte, bsize)
		}
		buf = buf[:bsize]
		if _, err := r.ReadAt(buf, pos); err != nil {
			return false, fmt.Errorf("read at %d: %w", pos, err)
		}
		valid := segment.ComputeCRC(buf) == h.CRC
		ok = ok && valid
		tsType := "CreateTime"
		if h.IsLogAppendTime() {
			tsType = "LogAppendTime"
		}
		codec, known := codecNames[h.Compression()]
		if !known {
			codec = fmt.Sprintf("unknown(%d)", h.Compression())
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d "+
			"partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d %s: %d baseTimestamp: %d size: %d magic: %d "+
			"compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch,
			h.LeaderEpoch, h.IsTransactional(), h.IsControl(), pos, tsType, h.MaxTimestamp, h.BaseTimestamp, bsize, h.Magic,
			codec, h.CRC, valid)
		pos += bsize
	}
	return ok, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
