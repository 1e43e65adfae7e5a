package symbolize

import (
	"bytes"
	"testing"
)

func win(code []byte, w int) bool {
	code = bytes.TrimPrefix(code, endbr64)
	if len(code) < 4 || code[0] != 0x55 {
		return false
	}
	x := code[1:min(len(code), 1+w+3)]
	return bytes.Contains(x, movRSP) || bytes.Contains(x, movRSPv2)
}

func TestZZ(t *testing.T) {
	c := NewCache()
	defer c.Close()
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so", "/tmp/fr0", "/tmp/fr", "/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/bin/gdb"} {
		o, err := c.Object(p)
		if err != nil {
			t.Log(err)
			continue
		}
		ws := []int{0, 12, 24, 32, 48}
		cnt := make([]int, len(ws))
		n := 0
		buf := make([]byte, 64)
		for _, s := range o.syms.syms {
			if !s.fn || s.size < 16 || !o.isCode(s.addr) {
				continue
			}
			k := o.readCode(s.addr, buf[:min(64, s.size)])
			n++
			for i, w := range ws {
				if win(buf[:k], w) {
					cnt[i]++
				}
			}
		}
		var out []float64
		for _, c := range cnt {
			out = append(out, float64(c)/float64(n))
		}
		t.Logf("%-50s n=%6d %.3f", p, n, out)
	}
}
