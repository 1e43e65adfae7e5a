package symbolize

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// FuzzObject opens arbitrary bytes as an object and queries it. Whatever the
// input, opening must either fail or give an object on which every method
// returns without panicking and within its documented range.
func FuzzObject(f *testing.F) {
	seed, err := os.ReadFile("testdata/tiny.elf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:64])          // the ELF header alone
	f.Add(seed[:len(seed)/2]) // section headers cut off
	f.Add([]byte("\x7fELF"))

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "obj")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := NewCache()
		defer c.Close()
		o, err := c.Object(path)
		if (o == nil) == (err == nil) {
			t.Fatalf("Object() = %v, %v: want exactly one of object and error", o, err)
		}
		if err != nil {
			return
		}
		if _, err := hex.DecodeString(o.BuildID); err != nil {
			t.Fatalf("BuildID %q is not hex", o.BuildID)
		}
		addrs := []uint64{0, 1, 0x400000, 0x401000, 1 << 63, ^uint64(0)}
		for _, name := range []string{"_start", "twice"} {
			if v, ok := o.Lookup(name); ok {
				addrs = append(addrs, v, v+1, v+7)
			}
			o.Exports(name)
		}
		for _, s := range o.syms.syms {
			addrs = append(addrs, s.addr, s.addr+s.size)
		}
		for _, a := range addrs {
			fn, file, line := o.Symbolize(a)
			if line < 0 || (line > 0 && file == "") {
				t.Fatalf("Symbolize(%#x) = %q, %q, %d", a, fn, file, line)
			}
			o.CallPrecedes(a)
			o.VAddr(a, 0x400000, 0x1000)
		}
		share, funcs := o.FramePointerShare()
		if share < 0 || share > 1 || funcs < 0 || (funcs == 0 && share != 0) {
			t.Fatalf("FramePointerShare() = %v, %d", share, funcs)
		}
		switch FramePointerClass(share, funcs) {
		case "yes", "no", "mixed":
		default:
			t.Fatalf("FramePointerClass(%v, %d) out of range", share, funcs)
		}
	})
}

// FuzzCheckDebugData feeds arbitrary bytes to the check of a file a
// debuginfod server sent. It must never panic, and must accept only ELF
// whose build ID is the one asked for.
func FuzzCheckDebugData(f *testing.F) {
	seed, err := os.ReadFile("testdata/tiny.elf")
	if err != nil {
		f.Fatal(err)
	}
	c := NewCache()
	o, err := c.Object("testdata/tiny.elf")
	c.Close()
	if err != nil || o.BuildID == "" {
		f.Fatalf("testdata/tiny.elf: build id %q, %v", o.BuildID, err)
	}
	f.Add(seed, o.BuildID)
	f.Add(seed, "00"+o.BuildID[2:])
	f.Add(seed[:64], o.BuildID)
	f.Add([]byte("<html>"), o.BuildID)

	f.Fuzz(func(t *testing.T, data []byte, id string) {
		if err := checkDebugData(data, id); err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "debuginfo")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		d := openDebugFile(path, "", func(d *debugFile) bool { return matchBuildID(d, id) })
		if d == nil {
			t.Fatalf("accepted data that is not the debug file of %q", id)
		}
		d.close()
	})
}
