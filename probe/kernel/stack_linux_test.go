//go:build linux

package kernel

import "testing"

// An entry with the method bit holds a Method* and its bytecode index + 1
// (STACK_JVM_METHOD); any other entry is a return address.
func TestMethodEntry(t *testing.T) {
	for _, c := range []struct {
		entry  uint64
		method uint64
		bci    int
		ok     bool
	}{
		{0x7f0000401000, 0, 0, false},
		{stackJVMMethod | 0x7000 | 6<<stackJVMBCIShift, 0x7000, 5, true},
		{stackJVMMethod | 0x7100, 0x7100, -1, true},
	} {
		method, bci, ok := MethodEntry(c.entry)
		if method != c.method || bci != c.bci || ok != c.ok {
			t.Errorf("MethodEntry(%#x) = %#x, %d, %v; want %#x, %d, %v", c.entry, method, bci, ok, c.method, c.bci, c.ok)
		}
	}
}
