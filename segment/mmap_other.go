//go:build !linux

package segment

import "os"

// bufMapping stands in for mmap where syscall.Mmap is not used: the bytes
// live in memory and are written back on Close. Index writes are therefore
// only durable after the index is closed; recovery rebuilds the rest.
type bufMapping struct {
	f *os.File
	b []byte
}

func mmapFile(f *os.File, size int) (Mapping, error) {
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return &bufMapping{f: f, b: b}, nil
}

func (m *bufMapping) Bytes() []byte { return m.b }

// Detached is false: the bytes are written back through the file, which
// the index keeps open (and fsyncs) as before.
func (m *bufMapping) Detached() bool { return false }

// Sync is not used on a mapping that is not Detached (the file's is).
func (m *bufMapping) Sync() error { return nil }

func (m *bufMapping) Close() error {
	if m.b == nil {
		return nil
	}
	_, err := m.f.WriteAt(m.b, 0)
	m.b = nil
	return err
}
