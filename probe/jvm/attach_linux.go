package jvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/probe/procfs"
)

// Errors callers match with errors.Is.
var (
	// ErrNotReady means the JVM does not handle SIGQUIT (yet): it is still
	// starting, or runs with -Xrs. Sending the signal would kill it.
	ErrNotReady = errors.New("JVM does not handle SIGQUIT (still starting, or -Xrs)")
	// ErrAttachDisabled means the JVM runs with -XX:+DisableAttachMechanism.
	ErrAttachDisabled = errors.New("attach mechanism disabled (-XX:+DisableAttachMechanism)")
	// ErrCommandFailed means the JVM ran the command and reported an error.
	ErrCommandFailed = errors.New("command failed")
)

// attachTimeout bounds the wait for a JVM to start its attach listener:
// 10 s, as jcmd waits. A listener normally appears within 100 ms, but a JVM
// on a loaded machine, still starting, took over 5 s here (2 CPUs, two test
// suites beside it).
const attachTimeout = 10 * time.Second

// Bounds on one command's exchange with the JVM, which a target controls.
const (
	// MaxReply bounds a reply in bytes: the commands leakscope sends
	// answer with a few KiB at most (the perf map goes to a file).
	MaxReply = 1 << 20
	// ReplyTimeout bounds one exchange: connecting, sending the request
	// and reading the whole reply. HotSpot answers once the command ran;
	// Compiler.perfmap of a full code cache takes a few 100 ms.
	ReplyTimeout = 2 * time.Second
)

// Execute runs one command of HotSpot's attach protocol in the JVM with
// host pid pid and returns its output: "jcmd" with a diagnostic command
// line ("Compiler.perfmap"), "properties", "printflag" with a flag name,
// and so on (at most three arguments). It does what jcmd does, without
// jcmd: if the JVM's attach listener is not running, it creates the
// trigger file .attach_pid<pid> in the JVM's working directory (or its
// /tmp), sends SIGQUIT, waits for the listener's socket and removes the
// trigger file; it then connects as the JVM's effective user and group.
//
// Paths go through /proc/<pid>/root and use the JVM's own pid (NSpid), so
// JVMs in containers work. The call is bounded by ctx, by attachTimeout for
// the listener to appear and by ReplyTimeout for the exchange; a reply
// longer than MaxReply is an error.
func Execute(ctx context.Context, pid int, cmd string, args ...string) (string, error) {
	if len(args) > 3 {
		return "", fmt.Errorf("attach command %s: %d arguments, the protocol takes at most 3", cmd, len(args))
	}
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		return "", err
	}
	nspid := st.OwnPid()
	socket := fmt.Sprintf("/proc/%d/root/tmp/.java_pid%d", pid, nspid)
	if fi, err := os.Stat(socket); err == nil && staleSocket(pid, fi) {
		// Left by a JVM that was killed and had the same pid: this one's
		// listener would unlink it before binding anyway.
		_ = os.Remove(socket)
	}
	if _, err := os.Stat(socket); err != nil {
		if err := startListener(ctx, pid, nspid, st, socket); err != nil {
			return "", fmt.Errorf("attach to JVM %d: %w", pid, err)
		}
	}
	data, err := exchange(ctx, socket, st.UID[1], st.GID[1], request(cmd, args))
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return "", fmt.Errorf("attach to JVM %d: %s: %w", pid, cmd, context.Cause(ctx))
		}
		return "", fmt.Errorf("JVM attach protocol: pid %d: %s: %w", pid, cmd, err)
	}
	code, out, err := ParseReply(data)
	if err != nil {
		return "", fmt.Errorf("JVM attach protocol: pid %d: reply to %s: %w", pid, cmd, err)
	}
	if code != 0 {
		return out, fmt.Errorf("JVM %d: %s: %w (code %d): %s", pid, strings.TrimSpace(cmd+" "+strings.Join(args, " ")),
			ErrCommandFailed, code, excerpt(strings.TrimSpace(out)))
	}
	return out, nil
}

// request is an attach-protocol request: protocol version, command and
// exactly three arguments, each NUL-terminated.
func request(cmd string, args []string) []byte {
	req := []byte("1\x00" + cmd + "\x00")
	for i := 0; i < 3; i++ {
		if i < len(args) {
			req = append(req, args[i]...)
		}
		req = append(req, 0)
	}
	return req
}

// exchange sends req to the listener at socket, connecting as uid and gid,
// and reads the reply until the JVM closes the connection: all of it
// within ReplyTimeout (or ctx) and at most MaxReply bytes.
func exchange(ctx context.Context, socket string, uid, gid int, req []byte) ([]byte, error) {
	budget := ReplyTimeout
	deadline := time.Now().Add(budget)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline, budget = dl, time.Until(dl).Round(time.Millisecond)
	}
	conn, err := dialAs(socket, uid, gid, deadline)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", socket, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	timedOut := func(err error) bool {
		return errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(ctx.Err(), context.Canceled)
	}
	if _, err := conn.Write(req); err != nil {
		if timedOut(err) {
			return nil, fmt.Errorf("request not taken within %v", budget)
		}
		return nil, fmt.Errorf("send request: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(conn, MaxReply+1))
	switch {
	case len(data) > MaxReply:
		return nil, fmt.Errorf("reply exceeded %d MiB", MaxReply>>20)
	case err != nil && timedOut(err) && len(data) == 0:
		return nil, fmt.Errorf("no reply within %v", budget)
	case err != nil && timedOut(err):
		return nil, fmt.Errorf("reply not complete within %v (%d bytes read)", budget, len(data))
	case err != nil:
		return nil, fmt.Errorf("read reply: %w", err)
	}
	return data, nil
}

// maxResultLine bounds the result code line of a reply.
const maxResultLine = 32

// ParseReply splits an attach-protocol reply: the result code, a decimal
// integer on a line of its own (HotSpot writes "0\n" for success), then
// the command's output, everything up to the end. An error says what the
// reply lacks, quoting at most a short excerpt of it.
func ParseReply(data []byte) (code int, out string, err error) {
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		if len(data) == 0 {
			return 0, "", errors.New("empty reply")
		}
		return 0, "", fmt.Errorf("no result code line in %d bytes: %q", len(data), excerpt(string(data)))
	}
	if len(line) > maxResultLine {
		return 0, "", fmt.Errorf("result code line of %d bytes: %q", len(line), excerpt(string(line)))
	}
	code, err = strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		return 0, "", fmt.Errorf("bad result code %q", line)
	}
	return code, string(rest), nil
}

// maxExcerpt bounds the part of a reply an error quotes.
const maxExcerpt = 200

// excerpt is the first line of s, cut to maxExcerpt bytes.
func excerpt(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > maxExcerpt {
		s = s[:maxExcerpt] + " ..."
	}
	return s
}

// staleSocket reports whether the socket file fi was made before process
// pid started, by an earlier process with the same pid.
func staleSocket(pid int, fi os.FileInfo) bool {
	start := startTime(pid)
	// Start times have a tick's precision and boot time a second's.
	return fi.Mode()&os.ModeSocket != 0 && !start.IsZero() && fi.ModTime().Before(start.Add(-2*time.Second))
}

// startListener makes the JVM start its attach listener, as jcmd does.
func startListener(ctx context.Context, pid, nspid int, st procfs.Status, socket string) error {
	if !st.Catches(int(unix.SIGQUIT)) {
		return ErrNotReady
	}
	if attachDisabled(pid) {
		// SIGQUIT would only print a thread dump on the JVM's stdout.
		return ErrAttachDisabled
	}
	remove, err := createTrigger(pid, nspid)
	if err != nil {
		return err
	}
	defer remove()
	if err := unix.Kill(pid, unix.SIGQUIT); err != nil {
		return fmt.Errorf("send SIGQUIT: %w", err)
	}
	start := time.Now()
	resent := false
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("no attach listener within %v: %s did not appear", time.Since(start).Round(time.Millisecond), socket)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		if _, err := os.Stat(socket); err == nil {
			return nil
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return fmt.Errorf("process %d %w", pid, procfs.ErrNoProcess)
		}
		waited := time.Since(start)
		if waited > attachTimeout {
			return fmt.Errorf("no attach listener after %v: %s did not appear", attachTimeout, socket)
		}
		// As jcmd does: one more signal half-way, in case the first came
		// while the JVM could not act on it. A listener that is already
		// starting ignores it.
		if !resent && waited > attachTimeout/2 {
			resent = true
			if err := unix.Kill(pid, unix.SIGQUIT); err != nil {
				return fmt.Errorf("send SIGQUIT: %w", err)
			}
		}
	}
}

// createTrigger creates the file whose presence tells the JVM's SIGQUIT
// handler to start the attach listener: .attach_pid<nspid> in the JVM's
// working directory, or in its /tmp if that is not writable. It returns a
// function that removes the file again, through a directory handle that
// outlives the process. A trigger file that exists already belongs to
// someone else attaching at the same time: it is used and left alone.
func createTrigger(pid, nspid int) (remove func(), err error) {
	name := fmt.Sprintf(".attach_pid%d", nspid)
	var errs []error
	for _, dir := range []string{fmt.Sprintf("/proc/%d/cwd", pid), fmt.Sprintf("/proc/%d/root/tmp", pid)} {
		root, err := os.OpenRoot(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := root.OpenFile(name, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			root.Close()
			return func() {}, nil
		}
		if err != nil {
			root.Close()
			errs = append(errs, fmt.Errorf("create %s/%s: %w", dir, name, err))
			continue
		}
		f.Close()
		return func() {
			_ = root.Remove(name)
			root.Close()
		}, nil
	}
	return nil, fmt.Errorf("create attach trigger: %w", errors.Join(errs...))
}

// attachDisabled reports whether the JVM's command line or the environment
// variables the launcher reads turn the attach mechanism off.
func attachDisabled(pid int) bool {
	v, _ := CommandLineFlag(pid, "DisableAttachMechanism")
	return v
}

// CommandLineFlag finds the boolean -XX flag name on the command line of
// the JVM with host pid pid, or in JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS or
// _JAVA_OPTIONS; the last setting wins, as in HotSpot. Flags from
// @argfiles or -XX:Flags= files are not seen: only the JVM itself can tell
// (the attach command printflag).
func CommandLineFlag(pid int, name string) (value, found bool) {
	var words []string
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			for _, k := range []string{"JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS=", "_JAVA_OPTIONS="} {
				if v, ok := strings.CutPrefix(kv, k); ok {
					words = append(words, strings.Fields(v)...)
				}
			}
		}
	}
	if argv, err := procfs.Command(pid); err == nil {
		words = append(words, argv...)
	}
	for _, w := range words {
		switch w {
		case "-XX:+" + name:
			value, found = true, true
		case "-XX:-" + name:
			value, found = false, true
		}
	}
	return value, found
}

// dialAs connects to the unix socket at path. HotSpot accepts a peer whose
// effective uid and gid are the JVM's (JDK 11 and later also accept root),
// and the socket file is the JVM user's, mode 0600. When the JVM runs as
// another user, the connect is made on an OS thread of its own with that
// thread's effective ids switched to the JVM's (Linux credentials are per
// thread at the system-call level). The thread is never unlocked, so it
// exits with its goroutine and no other goroutine ever runs with its
// credentials; the main thread, which Go never ends, is never used.
// Connecting gives up at deadline: a listener whose backlog is full (it
// does not accept) makes a connect wait.
func dialAs(path string, uid, gid int, deadline time.Time) (net.Conn, error) {
	if uid == os.Geteuid() && gid == os.Getegid() {
		d := net.Dialer{Deadline: deadline}
		return d.Dial("unix", path)
	}
	// Opened with our own credentials: the unprivileged thread may not
	// be allowed to look the path up (/proc/<pid>/root of a container).
	ref, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(ref)
	type result struct {
		fd  int
		err error
	}
	connect := func(done chan<- result) {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		fd, err := connectOnThreadAs(ref, uid, gid, deadline)
		done <- result{fd, err}
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			connect(done)
			return
		}
		// This is the main thread, which Go never ends: it would stay
		// with the JVM's credentials. Keep it busy here, so the
		// switching goroutine runs on another thread.
		inner := make(chan result, 1)
		go connect(inner)
		done <- <-inner
		runtime.UnlockOSThread()
	}()
	res := <-done
	if res.err != nil {
		return nil, res.err
	}
	f := os.NewFile(uintptr(res.fd), path)
	defer f.Close()
	return net.FileConn(f)
}

// connectOnThreadAs switches the calling (locked) thread's effective gid
// and uid, then connects a new socket to the socket file ref refers to,
// trying until deadline while the listener's backlog is full. Go's
// syscall.Setresuid would change every thread of the process, so the raw
// system calls are used.
func connectOnThreadAs(ref, uid, gid int, deadline time.Time) (int, error) {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); errno != 0 {
		return -1, fmt.Errorf("switch to gid %d: %w", gid, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); errno != 0 {
		return -1, fmt.Errorf("switch to uid %d: %w", uid, errno)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("create socket: %w", err)
	}
	// The socket file is reached through our reference to it: this
	// thread's own fd directory is always open to it.
	addr := &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/thread-self/fd/%d", ref)}
	for {
		err = unix.Connect(fd, addr)
		if errors.Is(err, syscall.EAGAIN) && time.Now().Before(deadline) {
			// The backlog is full: a non-blocking unix socket does not
			// wait for room, so try again shortly.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EAGAIN) {
		err = errors.New("the listener accepts no connection (backlog full)")
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect as uid %d gid %d: %w", uid, gid, err)
	}
	return fd, nil
}
