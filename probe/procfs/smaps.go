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

// Region is one mapping of /proc/<pid>/smaps with the sizes the kernel
// gives it, in bytes.
type Region struct {
	Mapping
	Rss       uint64 // resident: what the mapping adds to the process's RSS
	Anonymous uint64 // of Rss, anonymous pages (a private file mapping's written pages too)
	Swap      uint64 // swapped out, not in Rss
}

// MaxSmapsSize bounds what ReadSmaps reads of one smaps file: a process
// holds at most vm.max_map_count mappings (65530 by default) of about 1 KiB
// each, 64 MiB.
const MaxSmapsSize = 128 << 20

// ParseSmaps parses the content of a /proc/<pid>/smaps file: each mapping's
// line as in maps, then its "Name: N kB" fields. Fields it does not use are
// skipped, whatever their value; a malformed mapping line, a used field
// that is not a number of kB, or a field before the first mapping stops
// parsing with an error naming its 1-based line number, so the result is
// every mapping or an error.
func ParseSmaps(r io.Reader) ([]Region, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	sc.Split(scanLines)
	var regions []Region
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(text) == 0 {
			continue
		}
		name, value, field := smapsField(text)
		if !field {
			m, err := parseMapsLine(string(text))
			if err != nil {
				return nil, fmt.Errorf("parse smaps line %d: %w", line, err)
			}
			regions = append(regions, Region{Mapping: m})
			continue
		}
		if len(regions) == 0 {
			return nil, fmt.Errorf("parse smaps line %d: field %q before the first mapping", line, name)
		}
		var dst *uint64
		cur := &regions[len(regions)-1]
		switch name {
		case "Rss":
			dst = &cur.Rss
		case "Anonymous":
			dst = &cur.Anonymous
		case "Swap":
			dst = &cur.Swap
		default:
			continue
		}
		v, err := parseKB(value)
		if err != nil {
			return nil, fmt.Errorf("parse smaps line %d: %s: %w", line, name, err)
		}
		*dst = v
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("parse smaps line %d: longer than %d bytes", line+1, maxLineBytes)
		}
		return nil, fmt.Errorf("read smaps: %w", err)
	}
	return regions, nil
}

// smapsField splits a field line, "Rss:   1234 kB", into its name and
// value. A mapping line's first word is an address range and never ends
// in ':'.
func smapsField(line []byte) (name, value string, ok bool) {
	word, rest, _ := bytes.Cut(line, []byte(" "))
	n, ok := bytes.CutSuffix(word, []byte(":"))
	if !ok || len(n) == 0 || bytes.IndexByte(n, '-') >= 0 {
		return "", "", false
	}
	return string(n), strings.TrimSpace(string(rest)), true
}

// parseKB parses "1234 kB" into bytes.
func parseKB(s string) (uint64, error) {
	num, ok := strings.CutSuffix(s, " kB")
	if !ok {
		return 0, fmt.Errorf("%q: want a number of kB", s)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errors.Unwrap(err))
	}
	if v > (1<<64-1)/1024 {
		return 0, fmt.Errorf("%q: more bytes than 64 bits hold", s)
	}
	return v * 1024, nil
}

// ReadSmaps reads and parses /proc/<pid>/smaps, at most MaxSmapsSize bytes
// of it (a larger file is an error, not a partial list).
func ReadSmaps(pid int) ([]Region, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, procError(pid, "smaps", err)
	}
	defer f.Close()
	// Read everything first, as ReadMaps does: the kernel builds the file
	// while it is read.
	data, err := io.ReadAll(io.LimitReader(f, MaxSmapsSize+1))
	if err != nil {
		return nil, procError(pid, "smaps", err)
	}
	if len(data) > MaxSmapsSize {
		return nil, fmt.Errorf("process %d: smaps is larger than %d bytes", pid, MaxSmapsSize)
	}
	regions, err := ParseSmaps(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return regions, nil
}

// maxSyscallSize bounds a /proc/<pid>/task/<tid>/syscall file: a number
// and eight hex words.
const maxSyscallSize = 256

// ParseSyscallSP returns the user stack pointer in the content of a
// /proc/<pid>/task/<tid>/syscall file: "NR ARG1 … ARG6 SP PC" for a
// thread blocked in a system call, "-1 SP PC" for one blocked elsewhere;
// ok is false for "running" (the kernel cannot read a running thread's
// registers) or anything malformed.
func ParseSyscallSP(data []byte) (sp uint64, ok bool) {
	if len(data) > maxSyscallSize {
		return 0, false
	}
	f := strings.Fields(string(data))
	switch {
	case len(f) == 9:
	case len(f) == 3 && f[0] == "-1":
	default:
		return 0, false
	}
	if _, err := strconv.ParseInt(f[0], 10, 64); err != nil {
		return 0, false
	}
	s, found := strings.CutPrefix(f[len(f)-2], "0x")
	if !found {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v == 0 {
		return 0, false
	}
	return v, true
}

// ThreadStackPointers returns the user stack pointer of every thread of
// pid that is blocked (ParseSyscallSP), and how many threads it could not
// read one for (running, or gone meanwhile). Each file is read up to
// maxSyscallSize bytes.
func ThreadStackPointers(pid int) (sps []uint64, unknown int, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, procError(pid, "task", err)
	}
	buf := make([]byte, maxSyscallSize+1)
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open(dir + "/" + e.Name() + "/syscall")
		if err != nil {
			unknown++
			continue
		}
		n, _ := io.ReadFull(f, buf)
		f.Close()
		if sp, ok := ParseSyscallSP(buf[:n]); ok {
			sps = append(sps, sp)
		} else {
			unknown++
		}
	}
	return sps, unknown, nil
}
