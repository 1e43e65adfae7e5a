//go:build linux && amd64

package probe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// execMapper maps its argument, a file, readable and executable, says so
// on stdout and waits to be killed.
const execMapper = `#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0 || mmap(0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
		return 1;
	puts("mapped");
	fflush(stdout);
	pause();
	return 0;
}
`

// An executable mapping leakscope cannot read as an ELF object may hold a
// zlib or a declared pair it cannot probe: attach says so, naming the
// file, instead of leaving it untraced in silence.
func TestUnreadableObjectIsSaid(t *testing.T) {
	testutil.RequireBPF(t)
	dir := t.TempDir()
	src, bin, blob := filepath.Join(dir, "mapper.c"), filepath.Join(dir, "mapper"), filepath.Join(dir, "not-elf.bin")
	if err := os.WriteFile(src, []byte(execMapper), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	if err := os.WriteFile(blob, []byte(strings.Repeat("not an ELF object\n", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, blob)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
	line := make([]byte, 7)
	if _, err := out.Read(line); err != nil || string(line) != "mapped\n" {
		t.Fatalf("mapper said %q (%v)", line, err)
	}
	var mu sync.Mutex
	var said []string
	tr, err := Attach(cmd.Process.Pid, Options{Warnf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, strings.TrimSpace(fmt.Sprintf(format, args...)))
	}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	c, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := blob + " cannot be read as an ELF object ("
	found := 0
	for _, w := range c.Warnings {
		if strings.HasPrefix(w, want) && strings.HasSuffix(w, "): a zlib or declared pair in it is not traced") {
			found++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if found != 1 {
		t.Errorf("the capture's warnings name %s %d times, want once:\n%s\nsaid:\n%s", blob, found, strings.Join(c.Warnings, "\n"), strings.Join(said, "\n"))
	}
	for _, w := range c.Warnings {
		if strings.Contains(w, bin) {
			t.Errorf("a warning names the mapper itself, an ELF object: %s", w)
		}
	}
}
