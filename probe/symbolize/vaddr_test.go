package symbolize

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os/exec"
	"testing"

	"github.com/leakscope/leakscope/probe/procfs"
)

func TestVAddrSegments(t *testing.T) {
	// Shaped like a shared library whose data segment sits one page
	// higher in memory than in the file.
	o := &Object{loads: []elf.ProgHeader{
		{Type: elf.PT_LOAD, Off: 0, Vaddr: 0, Filesz: 0x800},
		{Type: elf.PT_LOAD, Off: 0x1000, Vaddr: 0x1000, Filesz: 0x2345, Flags: elf.PF_X},
		{Type: elf.PT_LOAD, Off: 0x3df0, Vaddr: 0x4df0, Filesz: 0x210, Memsz: 0x1000},
	}}
	const start = 0x7f0000000000 // load bias
	tests := []struct {
		addr, mapStart, mapOffset, want uint64
	}{
		{start + 0x1234, start + 0x1000, 0x1000, 0x1234},                   // code
		{start + 0x4e00, start + 0x4000, 0x3000, 0x4e00},                   // data: file 0x3e00
		{start + 0x10, start, 0, 0x10},                                     // first segment
		{start + 0x4d00, start + 0x4000, 0x3000, 0x4d00 - 0x1000 + 0x1000}, // page padding before data: nearest segment below
		{0x5000, 0x5000, 0x10000, 0x10000 - 0x3df0 + 0x4df0},               // beyond the file: nearest segment below
	}
	for _, tt := range tests {
		if got := o.VAddr(tt.addr, tt.mapStart, tt.mapOffset); got != tt.want {
			t.Errorf("VAddr(%#x, %#x, %#x) = %#x, want %#x", tt.addr, tt.mapStart, tt.mapOffset, got, tt.want)
		}
	}
	if got := (&Object{}).VAddr(0x1234, 0x1000, 0x10); got != 0x244 {
		t.Errorf("VAddr without segments = %#x, want the file offset 0x244", got)
	}
}

// TestVAddrRunningProcess runs a program that prints the runtime addresses
// of one of its functions and of libc's malloc, and maps both back to ELF
// vaddrs through its /proc/PID/maps, as the tracer does. The non-PIE build
// is the case where vaddr and file offset differ.
func TestVAddrRunningProcess(t *testing.T) {
	for _, mode := range []string{"-pie", "-no-pie"} {
		t.Run(mode, func(t *testing.T) {
			prog := compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer", mode)
			cmd := exec.Command(prog)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close() // the program exits at EOF
				cmd.Wait()
			}()
			var middle, malloc uint64
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Sscanf(line, "0x%x 0x%x", &middle, &malloc); err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}

			pid := cmd.Process.Pid
			maps, err := procfs.ReadMaps(pid)
			if err != nil {
				t.Fatal(err)
			}
			c := NewCache()
			defer c.Close()
			for _, tc := range []struct {
				addr   uint64
				name   string
				export bool
			}{
				{middle, "middle", false},
				{malloc, "malloc", true},
			} {
				m, ok := findMapping(maps, tc.addr)
				if !ok {
					t.Fatalf("no executable mapping holds %s at %#x", tc.name, tc.addr)
				}
				o, err := c.Object(procfs.ObjectPath(pid, m))
				if err != nil {
					t.Fatal(err)
				}
				v := o.VAddr(tc.addr, m.Start, m.Offset)
				if want := mustLookup(t, o, tc.name); v != want {
					t.Errorf("%s: VAddr(%#x, %#x, %#x) = %#x, want %s at %#x", m.Path, tc.addr, m.Start, m.Offset, v, tc.name, want)
				}
				if fn, _, _ := o.Symbolize(v); fn != tc.name {
					t.Errorf("%s: Symbolize(%#x) = %q, want %s", m.Path, v, fn, tc.name)
				}
				if o.Exports(tc.name) != tc.export {
					t.Errorf("%s: Exports(%s) = %v, want %v", m.Path, tc.name, !tc.export, tc.export)
				}
			}
		})
	}
}

func findMapping(maps []procfs.Mapping, addr uint64) (procfs.Mapping, bool) {
	for _, m := range maps {
		if m.Start <= addr && addr < m.End && m.Exec() {
			return m, true
		}
	}
	return procfs.Mapping{}, false
}
