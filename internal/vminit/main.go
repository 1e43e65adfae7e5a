//go:build linux

// Command vminit is the /init of the initramfs that internal/vmtest boots
// under qemu: it mounts what loading BPF needs, runs each command of
// /commands (one a line, its arguments separated by spaces: the test
// binaries built for the guest with their flags), its output on the
// console, says how each ended and powers the machine off. A line
// "cat FILE" prints FILE, base64-encoded, for the host to read back (a
// report the guest wrote). The host reads the console for its lines:
//
//	vminit: run NAME ARGS...
//	vminit: exit NAME STATUS after SECONDS s
//	vminit: file FILE BYTES bytes
//	(FILE in base64, 76 characters a line)
//	vminit: end FILE
//	vminit: done STATUS (up SECONDS s)
//
// STATUS is the command's exit status (-1 when it could not be started,
// or FILE could not be read); done's is the first that was not 0, else 0.
// It is built for the guest's architecture with CGO_ENABLED=0 (no libc in
// the initramfs) by internal/vmtest.
package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

func main() {
	status := run()
	fmt.Printf("vminit: done %d (up %.1f s)\n", status, uptime())
	syscall.Sync()
	// Power off; if that fails, returning panics the kernel, and the
	// host's qemu -no-reboot exits on the reboot panic=-1 asks for.
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}

// run mounts the file systems and runs /commands: the first status that
// was not 0, else 0.
func run() int {
	for _, m := range []struct{ source, target, fstype string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"bpf", "/sys/fs/bpf", "bpf"},
		{"tracefs", "/sys/kernel/tracing", "tracefs"},
	} {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			fmt.Printf("vminit: mkdir %s: %v\n", m.target, err)
			return 1
		}
		// devtmpfs may be mounted already (CONFIG_DEVTMPFS_MOUNT).
		if err := syscall.Mount(m.source, m.target, m.fstype, 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			fmt.Printf("vminit: mount %s on %s: %v\n", m.fstype, m.target, err)
			return 1
		}
	}
	if b, err := os.ReadFile("/proc/version"); err == nil {
		fmt.Printf("vminit: %s", b)
	}
	f, err := os.Open("/commands")
	if err != nil {
		fmt.Printf("vminit: %v\n", err)
		return 1
	}
	defer f.Close()
	first := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		args := strings.Fields(sc.Text())
		if len(args) == 0 {
			continue
		}
		run := command
		if args[0] == "cat" && len(args) == 2 {
			run = cat
		}
		if status := run(args); status != 0 && first == 0 {
			first = status
		}
	}
	return first
}

// command runs args, its output on the console, and returns its exit
// status.
func command(args []string) int {
	fmt.Printf("vminit: run %s\n", strings.Join(args, " "))
	start := time.Now()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	cmd.Dir = "/tmp"
	cmd.Env = []string{"PATH=/", "HOME=/tmp", "TMPDIR=/tmp", "LEAKSCOPE_REQUIRE_BPF=1"}
	status := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else {
			fmt.Printf("vminit: %v\n", err)
			status = -1
		}
	}
	fmt.Printf("vminit: exit %s %d after %.1f s\n", args[0], status, time.Since(start).Seconds())
	return status
}

// cat prints the file args[1] in base64 between vminit's file and end
// lines, and returns 0, or -1 when it cannot be read.
func cat(args []string) int {
	data, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Printf("vminit: %v\n", err)
		return -1
	}
	fmt.Printf("vminit: file %s %d bytes\n", args[1], len(data))
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		fmt.Println(enc[:76])
		enc = enc[76:]
	}
	fmt.Println(enc)
	fmt.Printf("vminit: end %s\n", args[1])
	return 0
}

// uptime is the seconds since the kernel booted.
func uptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return -1
	}
	var up float64
	if _, err := fmt.Sscan(string(b), &up); err != nil {
		return -1
	}
	return up
}
