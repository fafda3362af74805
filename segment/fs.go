package segment

import (
	"errors"
	"io"
)

// ErrInjected is the error memfs returns for an operation armed with
// FailNext.
var ErrInjected = errors.New("segment: injected fault")

// FS is the filesystem the storage engine writes through. The real one is
// the operating system's (OSFS); tests use MemFS, which has strict sync
// semantics and fault injection. Missing files are reported with errors
// that satisfy errors.Is(err, fs.ErrNotExist).
type FS interface {
	// Create creates or truncates name, opened read-write.
	Create(name string) (File, error)
	// Open opens an existing file read-write.
	Open(name string) (File, error)
	// Stat returns the size of name.
	Stat(name string) (size int64, err error)
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	MkdirAll(name string) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]DirEntry, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name  string
	IsDir bool
}

// File is an open file. ReadAt may be called concurrently with any other
// method; the writing methods are called by one goroutine at a time.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Append writes p at the current end of the file in one write call.
	Append(p []byte) (int, error)
	Truncate(size int64) error
	Sync() error
	Size() (int64, error)
	// Map maps the first size bytes of the file read-write (the file must
	// be at least that long). Writes to the mapping are made durable by
	// Sync (of the file, or of the mapping when it is Detached). The
	// mapping must be closed before the file is truncated; a Detached
	// mapping outlives the file's Close.
	Map(size int) (Mapping, error)
	Close() error
}

// Mapping is a shared memory map of a file's prefix (mmap on Linux).
type Mapping interface {
	Bytes() []byte
	// Detached reports that the mapping needs no open file: it stays
	// valid after the file is closed and Sync makes its writes durable
	// (MAP_SHARED with msync on Linux). When false the file must stay
	// open and its Sync covers the mapping.
	Detached() bool
	// Sync makes the writes through a Detached mapping durable.
	Sync() error
	Close() error
}
