package symbolize

import (
	"os"
	"strings"
	"testing"
)

func TestHasFramePointerPrologue(t *testing.T) {
	tests := []struct {
		code string
		want bool
	}{
		{"554889e5", true},         // push %rbp; mov %rsp,%rbp
		{"f30f1efa554889e5", true}, // endbr64 first
		{"55488bec", true},         // the other mov encoding
		{"c8100000", true},         // enter $16,$0
		// gcc -O2 -fno-omit-frame-pointer: push %rbp; mov %edi,%r8d;
		// lea 0xcac(%rip),%rdx; mov $0x40,%esi; lea 0xcaf(%rip),%rcx;
		// xor %eax,%eax; mov %rsp,%rbp.
		{"554189f8488d15ac0c0000be40000000488d0daf0c000031c04889e5", true},
		// gcc -O2 without frame pointers: push %rbp; push %rbx; then
		// mov %rsp,%rbp to address a buffer, not to make a frame.
		{"55534889e5", false},
		{"554883ec104889e5", false}, // sub $16,%rsp in between
		{"5531ed4889e5", false},     // xor %ebp,%ebp in between
		{"55eb004889e5", false},     // a jump in between
		{"554889fd", false},         // push %rbp; mov %rdi,%rbp: %rbp as a plain register
		{"4883ec08", false},         // sub $8,%rsp
		{"e9aabbccdd", false},       // jmp: a tail-call stub
		{"55", false},               // truncated
		{"f30f1efa", false},         // endbr64 alone
		{"55" + strings.Repeat("90", maxPrologueInsns) + "4889e5", false}, // too far to be the prologue
		{"55" + strings.Repeat("90", maxPrologueInsns-1) + "4889e5", true},
	}
	for _, tt := range tests {
		if got := hasFramePointerPrologue(unhex(t, tt.code)); got != tt.want {
			t.Errorf("hasFramePointerPrologue(%s) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestFramePointerClass(t *testing.T) {
	tests := []struct {
		share float64
		funcs int
		want  string
	}{
		{1, 10, "yes"},
		{0.9, 10, "yes"},
		{0.89, 10, "mixed"},
		{0.5, 10, "mixed"},
		{0.49, 10, "no"},
		{0, 10, "no"},
		{0, 0, "no"},
		{1, 0, "no"},
	}
	for _, tt := range tests {
		if got := FramePointerClass(tt.share, tt.funcs); got != tt.want {
			t.Errorf("FramePointerClass(%v, %d) = %q, want %q", tt.share, tt.funcs, got, tt.want)
		}
	}
}

// TestFramePointerShare checks the measurements the thresholds were chosen
// from (see FramePointerYes).
func TestFramePointerShare(t *testing.T) {
	type object struct {
		path      string
		min, max  float64
		wantClass string
	}
	objects := []object{
		{compile(t, "gcc", "frames.c", "-O2"), 0, 0, "no"},
		// Ten frame-pointer functions and main; crt's _start has none.
		{compile(t, "gcc", "frames.c", "-O2", "-fno-omit-frame-pointer"), 0.9, 1, "yes"},
		{"/lib/x86_64-linux-gnu/libc.so.6", 0.005, 0.05, "no"},
		{"/lib/x86_64-linux-gnu/libz.so.1", 0, 0, "no"},
	}
	for _, jvm := range []string{
		"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so",
		"/usr/lib/jvm/temurin-25-jdk-amd64/lib/server/libjvm.so",
	} {
		if _, err := os.Stat(jvm); err == nil {
			objects = append(objects, object{jvm, 0.6, 0.8, "mixed"})
		}
	}
	for _, tt := range objects {
		if _, err := os.Stat(tt.path); err != nil {
			t.Errorf("%s missing: the Debian package providing it is a test dependency: %v", tt.path, err)
			continue
		}
		o := mustObject(t, tt.path)
		share, funcs := o.FramePointerShare()
		t.Logf("%s: %.1f%% of %d functions", tt.path, 100*share, funcs)
		if funcs == 0 || share < tt.min || share > tt.max {
			t.Errorf("%s: FramePointerShare() = %.3f of %d functions, want %.3f to %.3f", tt.path, share, funcs, tt.min, tt.max)
		}
		if got := FramePointerClass(share, funcs); got != tt.wantClass {
			t.Errorf("%s: class %q, want %q", tt.path, got, tt.wantClass)
		}
		if again, n := o.FramePointerShare(); again != share || n != funcs {
			t.Errorf("%s: second FramePointerShare() = %v, %d; want the cached %v, %d", tt.path, again, n, share, funcs)
		}
	}
}
