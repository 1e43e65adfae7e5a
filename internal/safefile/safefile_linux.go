package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links followed in one path, as the
// kernel's own limit does.
const maxLinks = 40

// WriteFile writes data to path whole or not at all, as a new file of
// mode 0600 renamed over the entry, or in place when the entry is an
// existing device or FIFO.
func WriteFile(path string, data []byte, opts Options) error {
	f, err := open(path, opts, modeWhole)
	if err != nil {
		return err
	}
	return f.write(data)
}

// Create creates path for writing as it happens (a capture appended to at
// every snapshot): a new, empty file of mode 0600 that replaces the entry
// at once, or an existing device or FIFO opened in place.
func Create(path string, opts Options) (*os.File, error) {
	f, err := open(path, opts, modeStream)
	if err != nil {
		return nil, err
	}
	if f.tmp != "" {
		if err := f.commit(); err != nil {
			return nil, err
		}
	}
	return f.f, nil
}

// Check fails when WriteFile could not write path, and writes nothing:
// an early check before a long capture. It creates and removes a file
// beside path, and opens no device or FIFO (a FIFO's reader would see
// the end of its input).
func Check(path string, opts Options) error {
	f, err := open(path, opts, modeCheck)
	if err != nil {
		return err
	}
	f.abort()
	return nil
}

// Dir is a directory resolved as the paths above are, for files written
// into it by name.
type Dir struct {
	d    *dir
	Path string
}

// MkdirAll resolves path, creating the directories that are missing
// (mode 0700). The directory itself must be owned by root or the
// effective user, unless opts.Force.
func MkdirAll(path string, opts Options) (*Dir, error) {
	d, err := start(path)
	if err != nil {
		return nil, err
	}
	if d, err = d.walk(path, path, opts, true); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		d.close()
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if !opts.Force && !trusted(st.Uid) {
		d.close()
		return nil, fmt.Errorf("directory %s is %w (uid %d): choose another directory or pass --force", path, ErrOtherUser, st.Uid)
	}
	return &Dir{d: d, Path: path}, nil
}

// WriteFile writes data to the entry name of the directory as the
// package's WriteFile does.
func (d *Dir) WriteFile(name string, data []byte, opts Options) error {
	f, err := d.openName(name, opts, modeWhole)
	if err != nil {
		return err
	}
	return f.write(data)
}

// Check fails when the directory's entry name could not be written, as
// the package's Check does.
func (d *Dir) Check(name string, opts Options) error {
	f, err := d.openName(name, opts, modeCheck)
	if err != nil {
		return err
	}
	f.abort()
	return nil
}

func (d *Dir) openName(name string, opts Options, mode int) (*file, error) {
	path := strings.TrimSuffix(d.Path, "/") + "/" + name
	if strings.Contains(name, "/") || name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("write %s: not a file name", path)
	}
	dup, err := d.d.dup()
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.Path, Err: err}
	}
	return dup.open(name, path, opts, mode)
}

// Close releases the directory.
func (d *Dir) Close() error { return d.d.close() }

// dir is an O_PATH descriptor of a resolved directory.
type dir struct{ fd int }

func (d *dir) close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

func (d *dir) dup() (*dir, error) {
	fd, err := unix.FcntlInt(uintptr(d.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &dir{fd: fd}, nil
}

func trusted(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// start opens the directory a path is relative to: / or the working
// directory.
func start(path string) (*dir, error) {
	from := "."
	if strings.HasPrefix(path, "/") {
		from = "/"
	}
	fd, err := unix.Open(from, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: from, Err: err}
	}
	return &dir{fd: fd}, nil
}

// walk resolves rel, a directory path relative to d (absolute paths go
// back to /), one name at a time, and returns the directory it names. d
// is consumed. With mkdir, missing directories are created (mode 0700).
// path names the whole path in errors.
func (d *dir) walk(rel, path string, opts Options, mkdir bool) (*dir, error) {
	if strings.HasPrefix(rel, "/") {
		d.close()
		var err error
		if d, err = start("/"); err != nil {
			return nil, err
		}
	}
	rest := components(rel)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err := unix.Mkdirat(d.fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				d.close()
				return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
			}
			fd, err = unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			d.close()
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			d.close()
			return nil, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			d.close()
			d.fd = fd
		case unix.S_IFLNK:
			target, err := readLink(fd, &st, path, opts)
			unix.Close(fd)
			if err == nil {
				if links++; links > maxLinks {
					err = &os.PathError{Op: "open", Path: path, Err: unix.ELOOP}
				}
			}
			if err != nil {
				d.close()
				return nil, err
			}
			if strings.HasPrefix(target, "/") {
				d.close()
				if d, err = start("/"); err != nil {
					return nil, err
				}
			}
			rest = append(components(target), rest...)
		default:
			unix.Close(fd)
			d.close()
			return nil, &os.PathError{Op: "open", Path: path, Err: unix.ENOTDIR}
		}
	}
	return d, nil
}

// readLink reads the symbolic link open as fd (O_PATH), when its owner is
// trusted or opts.Force.
func readLink(fd int, st *unix.Stat_t, path string, opts Options) (string, error) {
	if !opts.Force && !trusted(st.Uid) {
		return "", fmt.Errorf("%s: a symbolic link on the way is %w (uid %d) and is not followed: use another path or pass --force", path, ErrOtherUser, st.Uid)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: path, Err: err}
	}
	return string(buf[:n]), nil
}

// components splits a path into its names, dropping empty ones and ".".
func components(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// split returns the directory part and the last name of a file path.
func split(path string) (parent, name string, err error) {
	if path == "" || strings.HasSuffix(path, "/") {
		return "", "", fmt.Errorf("write %s: not a file name", path)
	}
	parent, name = "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parent, name = path[:i+1], path[i+1:]
	}
	if name == "." || name == ".." {
		return "", "", fmt.Errorf("write %s: not a file name", path)
	}
	return parent, name, nil
}

// Modes of open.
const (
	modeWhole  = iota // written at once, then renamed into place
	modeStream        // renamed into place at once, then written
	modeCheck         // only checked: a new file is made and removed
)

// file is a file being written: the new file (tmp, in d) until commit
// renames it to name, or an existing special file written in place.
type file struct {
	f    *os.File
	d    *dir
	tmp  string
	name string
	path string
}

// open resolves path's directory and opens its last name.
func open(path string, opts Options, mode int) (*file, error) {
	parent, name, err := split(path)
	if err != nil {
		return nil, err
	}
	d, err := start(path)
	if err != nil {
		return nil, err
	}
	if d, err = d.walk(parent, path, opts, false); err != nil {
		return nil, err
	}
	return d.open(name, path, opts, mode)
}

// open opens the entry name of d for writing; d is consumed.
func (d *dir) open(name, path string, opts Options, mode int) (*file, error) {
	for links := 0; ; links++ {
		var st unix.Stat_t
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return d.newFile(name, path)
		}
		if err != nil {
			d.close()
			return nil, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		other := !trusted(st.Uid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			d.close()
			return nil, &os.PathError{Op: "write", Path: path, Err: unix.EISDIR}
		case unix.S_IFREG:
			if other && !opts.Force {
				d.close()
				return nil, fmt.Errorf("%s is a file %w (uid %d): not replaced; use another path or pass --force", path, ErrOtherUser, st.Uid)
			}
			return d.newFile(name, path)
		case unix.S_IFLNK:
		default: // a device, FIFO or socket
			if other && !opts.Force {
				d.close()
				return nil, fmt.Errorf("%s is %w (uid %d): not written; use another path or pass --force", path, ErrOtherUser, st.Uid)
			}
			return d.special(name, path, unix.O_NOFOLLOW, mode, &st)
		}
		// A symbolic link: another user's is refused, or with --force
		// replaced (never followed); a trusted one is followed.
		fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		if err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the check: look again
			}
			d.close()
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(fd)
			continue // changed since the check: look again
		}
		if !trusted(st.Uid) {
			unix.Close(fd)
			if opts.Force {
				return d.newFile(name, path)
			}
			d.close()
			return nil, fmt.Errorf("%s is a symbolic link %w (uid %d): neither followed nor replaced; use another path or pass --force to replace the link", path, ErrOtherUser, st.Uid)
		}
		var fs unix.Statfs_t
		if err := unix.Fstatfs(d.fd, &fs); err == nil && fs.Type == unix.PROC_SUPER_MAGIC {
			// /proc/self/fd/1 and its like lead to no path: let the
			// kernel follow them; only root writes /proc.
			unix.Close(fd)
			return d.special(name, path, 0, mode, nil)
		}
		target, err := readLink(fd, &st, path, opts)
		unix.Close(fd)
		if err == nil && links >= maxLinks {
			err = &os.PathError{Op: "open", Path: path, Err: unix.ELOOP}
		}
		var parent string
		if err == nil {
			parent, name, err = split(target)
		}
		if err == nil {
			d, err = d.walk(parent, path, opts, false)
		} else {
			d.close()
		}
		if err != nil {
			return nil, err
		}
	}
}

// newFile creates the file that will replace name (mode 0600, whatever
// the umask).
func (d *dir) newFile(name, path string) (*file, error) {
	for range 100 {
		var r [6]byte
		_, _ = rand.Read(r[:])
		tmp := "." + name + "." + hex.EncodeToString(r[:])
		if len(tmp) > 255 {
			tmp = ".leakscope." + hex.EncodeToString(r[:])
		}
		fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			d.close()
			return nil, &os.PathError{Op: "create", Path: path, Err: err}
		}
		if err := unix.Fchmod(fd, 0o600); err != nil {
			unix.Close(fd)
			unix.Unlinkat(d.fd, tmp, 0)
			d.close()
			return nil, &os.PathError{Op: "chmod", Path: path, Err: err}
		}
		return &file{f: os.NewFile(uintptr(fd), path), d: d, tmp: tmp, name: name, path: path}, nil
	}
	d.close()
	return nil, &os.PathError{Op: "create", Path: path, Err: unix.EEXIST}
}

// special opens an existing device or FIFO without blocking (flags:
// O_NOFOLLOW, or 0 for a link of /proc); want, when set, is what the
// entry was when it was checked, and must still be. In modeCheck it is only checked
// for write access: opening a FIFO and closing it would end its reader's
// input.
func (d *dir) special(name, path string, flags, mode int, want *unix.Stat_t) (*file, error) {
	defer d.close()
	if mode == modeCheck {
		if err := unix.Faccessat(d.fd, name, unix.W_OK, unix.AT_EACCESS); err != nil {
			return nil, &os.PathError{Op: "write", Path: path, Err: err}
		}
		return &file{d: &dir{fd: -1}, path: path}, nil
	}
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0)
	if errors.Is(err, unix.ENXIO) {
		return nil, fmt.Errorf("write %s: a FIFO or socket with no reader", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if want != nil && (st.Dev != want.Dev || st.Ino != want.Ino) {
		// Swapped since the check (another user's FIFO in its place).
		unix.Close(fd)
		return nil, fmt.Errorf("write %s: changed while it was opened; try again", path)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		if flags&unix.O_NOFOLLOW != 0 {
			// Swapped for a regular file since the check: a regular
			// file is never written in place.
			unix.Close(fd)
			return nil, fmt.Errorf("write %s: changed while it was opened; try again", path)
		}
		// /proc/self/fd/N of a file the caller opened (a shell's
		// redirection): written as the shell would.
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	// Writes may block again (a pipe's reader is slow), as with a
	// shell's redirection.
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return &file{f: os.NewFile(uintptr(fd), path), d: &dir{fd: -1}, path: path}, nil
}

// write writes data and commits the file.
func (f *file) write(data []byte) error {
	_, err := f.f.Write(data)
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.f = nil
	if err != nil {
		f.abort()
		return fmt.Errorf("write %s: %w", f.path, unwrapPath(err))
	}
	if f.tmp == "" {
		f.d.close()
		return nil
	}
	return f.commit()
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// commit renames the new file over the entry.
func (f *file) commit() error {
	defer f.d.close()
	if err := unix.Renameat(f.d.fd, f.tmp, f.d.fd, f.name); err != nil {
		unix.Unlinkat(f.d.fd, f.tmp, 0)
		if f.f != nil {
			f.f.Close()
		}
		return &os.PathError{Op: "rename", Path: f.path, Err: err}
	}
	f.tmp = ""
	return nil
}

// abort closes the file and removes it if it is new.
func (f *file) abort() {
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
	if f.tmp != "" {
		unix.Unlinkat(f.d.fd, f.tmp, 0)
	}
	f.d.close()
}
