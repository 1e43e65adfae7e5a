package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/<pid>/maps: a range of the target's address
// space and what backs it.
type Mapping struct {
	Start, End uint64 // runtime addresses, End exclusive; Start < End
	Offset     uint64 // file offset in bytes mapped at Start
	Perms      string // four characters, e.g. "r-xp": read, write, exec, private/shared
	Dev        string // "major:minor" of the backing file's device, in hex
	Inode      uint64 // 0 for anonymous and pseudo mappings
	// Path is the backing file as the target sees it, a pseudo name such as
	// "[heap]", "[stack]", "[vdso]" or "[anon:name]", or "" for anonymous
	// memory. A " (deleted)" suffix is stripped and recorded in Deleted.
	Path string
	// Deleted is true when the file was unlinked after being mapped (for
	// example a library replaced by a package upgrade); open it through
	// ObjectPath, which uses /proc/<pid>/map_files.
	Deleted bool
}

// Exec reports whether the mapping is executable, i.e. holds code whose
// return addresses can appear on a stack.
func (m Mapping) Exec() bool {
	return len(m.Perms) >= 3 && m.Perms[2] == 'x'
}

// FileBacked reports whether a file backs the mapping (its Path is a
// file's), not anonymous memory or a pseudo mapping such as "[vdso]".
func (m Mapping) FileBacked() bool {
	return strings.HasPrefix(m.Path, "/")
}

// deletedSuffix is what the kernel's d_path appends to unlinked files.
const deletedSuffix = " (deleted)"

// maxLineBytes bounds one maps line. The kernel limits paths to PATH_MAX
// (4096 bytes) and the fixed fields take about 100.
const maxLineBytes = 64 << 10

// ParseMaps parses the content of a /proc/<pid>/maps file. Empty lines are
// skipped. A malformed line stops parsing with an error naming its 1-based
// line number ("parse maps line 3: ..."), so the result is either every
// mapping or an error, never a silently partial list.
//
// The kernel writes a newline in a path as the four bytes "\012" and does
// not escape backslashes, so Path keeps that escape as it is.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	sc.Split(scanLines)
	var maps []Mapping
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(text) == 0 {
			continue
		}
		m, err := parseMapsLine(string(text))
		if err != nil {
			return nil, fmt.Errorf("parse maps line %d: %w", line, err)
		}
		maps = append(maps, m)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("parse maps line %d: longer than %d bytes", line+1, maxLineBytes)
		}
		return nil, fmt.Errorf("read maps: %w", err)
	}
	return maps, nil
}

// scanLines is bufio.ScanLines without dropping a trailing '\r', which
// belongs to the path when a file name ends in one.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// parseMapsLine parses one line such as
//
//	7f047db1f000-7f047dc75000 r-xp 00026000 fe:00 326269      /usr/lib/x86_64-linux-gnu/libc.so.6
func parseMapsLine(s string) (Mapping, error) {
	var m Mapping
	rest := s
	var fields [5]string
	for i := range fields {
		var ok bool
		fields[i], rest, ok = strings.Cut(rest, " ")
		if !ok && i < len(fields)-1 {
			return m, fmt.Errorf("want at least 5 space-separated fields in %q", s)
		}
	}
	addrs, perms, off, dev, inode := fields[0], fields[1], fields[2], fields[3], fields[4]

	lo, hi, ok := strings.Cut(addrs, "-")
	if !ok {
		return m, fmt.Errorf("address range %q: want start-end", addrs)
	}
	var err error
	if m.Start, err = parseHex(lo); err != nil {
		return m, fmt.Errorf("start address %q: %w", lo, err)
	}
	if m.End, err = parseHex(hi); err != nil {
		return m, fmt.Errorf("end address %q: %w", hi, err)
	}
	if m.Start >= m.End {
		return m, fmt.Errorf("address range %q: start not below end", addrs)
	}
	if !validPerms(perms) {
		return m, fmt.Errorf("permissions %q: want 4 characters like r-xp", perms)
	}
	m.Perms = perms
	if m.Offset, err = parseHex(off); err != nil {
		return m, fmt.Errorf("offset %q: %w", off, err)
	}
	if !validDev(dev) {
		return m, fmt.Errorf("device %q: want major:minor in hex", dev)
	}
	m.Dev = dev
	if m.Inode, err = strconv.ParseUint(inode, 10, 64); err != nil {
		return m, fmt.Errorf("inode %q: %w", inode, errors.Unwrap(err))
	}

	// The kernel pads the path to a fixed column with spaces. A path that
	// itself starts with spaces cannot be told apart from padding.
	m.Path = strings.TrimLeft(rest, " ")
	if p, ok := strings.CutSuffix(m.Path, deletedSuffix); ok {
		m.Path, m.Deleted = p, true
	}
	return m, nil
}

// parseHex parses an unprefixed hexadecimal number as the kernel prints
// addresses and offsets.
func parseHex(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, errors.Unwrap(err) // drop strconv's repetition of the input
	}
	return v, nil
}

func validPerms(p string) bool {
	return len(p) == 4 &&
		(p[0] == 'r' || p[0] == '-') &&
		(p[1] == 'w' || p[1] == '-') &&
		(p[2] == 'x' || p[2] == '-') &&
		(p[3] == 'p' || p[3] == 's')
}

func validDev(d string) bool {
	major, minor, ok := strings.Cut(d, ":")
	return ok && isHex(major) && isHex(minor)
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// ReadMaps reads and parses /proc/<pid>/maps. A pid that does not exist
// yields an error wrapping ErrNoProcess; reading another user's process
// needs root or CAP_SYS_PTRACE, and the error says so.
func ReadMaps(pid int) ([]Mapping, error) {
	// Read everything first: the kernel builds the file while it is read,
	// so a slow parse would widen the window in which mappings change.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, procError(pid, "maps", err)
	}
	maps, err := ParseMaps(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return maps, nil
}

// ObjectPath returns the path through which this process can open the file
// behind m as the target sees it, or "" when m has no backing file
// (anonymous memory or a pseudo mapping such as [vdso]).
//
// It goes through /proc/<pid>/root so that paths resolve inside the target's
// mount namespace (containers). A deleted file has no path any more, so for
// it the result is /proc/<pid>/map_files/<start>-<end> (lowercase hex, no
// 0x), which opens the mapped file itself; that needs CAP_SYS_ADMIN (or
// CAP_CHECKPOINT_RESTORE on Linux 5.9 and later).
func ObjectPath(pid int, m Mapping) string {
	if !strings.HasPrefix(m.Path, "/") {
		return ""
	}
	if m.Deleted {
		return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
	}
	return fmt.Sprintf("/proc/%d/root%s", pid, m.Path)
}
