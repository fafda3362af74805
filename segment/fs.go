package segment

// FS is the filesystem the storage engine writes through. The real one is
// the operating system's; tests use an in-memory one with strict sync
// semantics and fault injection (memfs.go).
//
// STUB: the storage work fills in this interface.
type FS interface{}
