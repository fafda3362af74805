package segment

import (
	"fmt"
	"path/filepath"
)

// ReplaceFile makes data the content of path atomically on fsys: it writes
// data to path+".tmp", fsyncs and closes it, renames it over path and
// fsyncs path's directory. After a crash path holds either its old content
// or data, never a mix; a leftover .tmp file is garbage the next call
// overwrites. Errors name the step that failed and wrap the FS's error.
func ReplaceFile(fsys FS, path string, data []byte) error {
	tmp := path + ".tmp"
	if err := WriteSynced(fsys, tmp, data); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// WriteSynced creates (or truncates) name, writes data, fsyncs and closes
// it: the first half of ReplaceFile, for callers that rename several
// files before one directory fsync.
func WriteSynced(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
