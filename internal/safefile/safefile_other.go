//go:build !linux

package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile writes data to path whole or not at all, as a new file of
// mode 0600 renamed over the entry, or in place when the entry is an
// existing device or FIFO.
func WriteFile(path string, data []byte, opts Options) error {
	if special(path) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	f, tmp, err := create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Create creates path for writing as it happens: a new, empty file of
// mode 0600 that replaces the entry at once, or an existing device or
// FIFO opened in place.
func Create(path string, opts Options) (*os.File, error) {
	if special(path) {
		return os.OpenFile(path, os.O_WRONLY, 0)
	}
	f, tmp, err := create(path)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// Check fails when WriteFile could not write path, and writes nothing.
func Check(path string, opts Options) error {
	if special(path) {
		return nil
	}
	f, tmp, err := create(path)
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(tmp)
}

// Dir is a directory for files written into it by name.
type Dir struct {
	Path string
}

// MkdirAll creates path and the directories missing above it (mode 0700).
func MkdirAll(path string, opts Options) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	return &Dir{Path: path}, nil
}

// WriteFile writes data to the entry name of the directory as the
// package's WriteFile does.
func (d *Dir) WriteFile(name string, data []byte, opts Options) error {
	path, err := d.join(name)
	if err != nil {
		return err
	}
	return WriteFile(path, data, opts)
}

// Check fails when the directory's entry name could not be written.
func (d *Dir) Check(name string, opts Options) error {
	path, err := d.join(name)
	if err != nil {
		return err
	}
	return Check(path, opts)
}

// Close releases the directory.
func (d *Dir) Close() error { return nil }

func (d *Dir) join(name string) (string, error) {
	if strings.ContainsAny(name, `/\`) || name == "" || name == "." || name == ".." {
		return "", fmt.Errorf("write %s: not a file name", filepath.Join(d.Path, name))
	}
	return filepath.Join(d.Path, name), nil
}

// create makes a new file of mode 0600 beside path, to be renamed to it.
func create(path string) (*os.File, string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b[:])+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("write %s: %w", path, err)
	}
	return f, tmp, nil
}

// special reports whether path names an existing device or FIFO, which is
// written in place (/dev/stdout, a pipe), never replaced.
func special(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}
