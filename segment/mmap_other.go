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

func (m *bufMapping) Close() error {
	if m.b == nil {
		return nil
	}
	_, err := m.f.WriteAt(m.b, 0)
	m.b = nil
	return err
}
