//go:build !linux

package procfs

import (
	"fmt"
	"os"
)

// OpenFile opens name, relative to the directory dir (nil: an absolute path
// or one relative to the working directory), for reading. Off Linux there
// is no target to guard against (leakscope only reads capture files there):
// the file must be regular and within lim.MaxSize, a symbolic link in the
// last component is followed only with lim.FollowLink, and the owner is not
// checked.
func OpenFile(dir *os.File, name string, lim FileLimits) (*os.File, error) {
	path := name
	if dir != nil {
		path = dir.Name() + "/" + name
	}
	st, err := os.Lstat(path)
	if err == nil && st.Mode()&os.ModeSymlink != 0 {
		if !lim.FollowLink {
			return nil, fmt.Errorf("open %s: %w: a symbolic link, not a regular file", path, ErrUnsafeFile)
		}
		st, err = os.Stat(path)
	}
	if err != nil {
		return nil, err
	}
	if err := lim.checkInfo(st); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// What was opened is what is checked: the entry may have changed
	// between the stat and the open.
	if st, err = f.Stat(); err == nil {
		err = lim.checkInfo(st)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// checkInfo says why the file st describes is not accepted, or nil.
func (lim FileLimits) checkInfo(st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: a %s, not a regular file", ErrUnsafeFile, st.Mode().Type())
	}
	if lim.MaxSize > 0 && st.Size() > lim.MaxSize {
		return fmt.Errorf("%w: %d bytes, more than the %s accepted", ErrUnsafeFile, st.Size(), sizeText(lim.MaxSize))
	}
	return nil
}
