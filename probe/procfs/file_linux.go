package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// OpenFile opens name, relative to the directory dir (nil: an absolute path
// or one relative to the working directory), for reading a file that a
// target process controls: one under /proc/<pid>/root, or in a shared
// directory such as /tmp. Whatever the target put there, the open never
// blocks (a FIFO, a device) and, unless lim.FollowLink, does not follow a
// symbolic link in the last component (links before it are followed:
// /proc/<pid>/root itself is one); the file must be regular and within
// lim. Otherwise the error wraps ErrUnsafeFile and says what the file was.
//
// The name is first opened with O_PATH, which has no side effects on any
// kind of file, checked with fstat, then reopened for reading through
// /proc/self/fd: the checks apply to the file read.
func OpenFile(dir *os.File, name string, lim FileLimits) (*os.File, error) {
	dirfd, path := unix.AT_FDCWD, name
	if dir != nil {
		dirfd, path = int(dir.Fd()), dir.Name()+"/"+name
	}
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !lim.FollowLink {
		flags |= unix.O_NOFOLLOW
	}
	ref, err := retryEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags, 0) })
	runtime.KeepAlive(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(ref)
	var st unix.Stat_t
	if err := unix.Fstat(ref, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := lim.check(&st); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(fmt.Sprintf("/proc/self/fd/%d", ref), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// Regular files ignore O_NONBLOCK; clear it so that os.File does not
	// try the poller with it.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// check says why the file st describes is not accepted, or nil.
func (lim FileLimits) check(st *unix.Stat_t) error {
	if kind := st.Mode & unix.S_IFMT; kind != unix.S_IFREG {
		return fmt.Errorf("%w: a %s, not a regular file", ErrUnsafeFile, fileKind(kind))
	}
	if lim.MaxSize > 0 && st.Size > lim.MaxSize {
		return fmt.Errorf("%w: %d bytes, more than the %s accepted", ErrUnsafeFile, st.Size, sizeText(lim.MaxSize))
	}
	if lim.Owner != AnyOwner && st.Uid != 0 && int(st.Uid) != lim.Owner {
		return fmt.Errorf("%w: owned by uid %d, not by the target's uid %d or root", ErrUnsafeFile, st.Uid, lim.Owner)
	}
	return nil
}

func fileKind(kind uint32) string {
	switch kind {
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	}
	return fmt.Sprintf("file of type %#o", kind)
}

func retryEINTR(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
