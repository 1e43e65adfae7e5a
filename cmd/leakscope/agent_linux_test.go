//go:build linux && amd64

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// The agent under a real Prometheus (Debian's prometheus, started here on
// 127.0.0.1 with its own config and data directory): two leaking
// processes of the selected name, one started after the agent, each get
// a series whose culprit label names the leaking function, growing; and
// go tool pprof fetches /debug/pprof/leaks and shows the leak.
func TestAgentPrometheus(t *testing.T) {
	testutil.RequireBPF(t)
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		testutil.SkipOrFail(t, "no prometheus binary (Debian's prometheus package; make deps)")
	}
	buildStart := time.Now()
	leakscope, leaky := buildAll(t, "leaky")
	t.Logf("built leakscope and leaky in %s", time.Since(buildStart).Round(time.Millisecond))
	dir := t.TempDir()
	// A name of this test's own, so the agent attaches to no other
	// test's leaky (comm is at most 15 bytes).
	name := fmt.Sprintf("agleak%d", os.Getpid()%100000)
	prog := filepath.Join(dir, name)
	if err := os.Link(leaky, prog); err != nil {
		t.Fatal(err)
	}
	startLeaky := func() *exec.Cmd {
		cmd := exec.Command(prog, "--forever", "--interval", "500")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := startLeaky()

	agentAddr := startAgent(t, leakscope, "--select", "comm="+name,
		"--interval", "1s", "--scan", "200ms", "--sample-bytes", "64KiB", "--keep-exited", "4s", "--log-format", "json")
	waitFor(t, 30*time.Second, "the agent to attach to the first process", func() bool {
		body, err := httpGet("http://" + agentAddr + "/metrics")
		return err == nil && strings.Contains(body, fmt.Sprintf(`leakscope_target_info{pid="%d"`, first.Process.Pid))
	})
	second := startLeaky() // after the agent

	promPort := testutil.FreePort(t)
	promAddr := fmt.Sprintf("127.0.0.1:%d", promPort)
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: leakscope
    static_configs:
      - targets: ['%s']
`, agentAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	var promLog bytes.Buffer
	pcmd := exec.Command(prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	pcmd.Stdout, pcmd.Stderr = &promLog, &promLog
	if err := pcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pcmd.Process.Signal(syscall.SIGTERM)
		_ = pcmd.Wait()
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", promLog.String())
		}
	})
	waitFor(t, 30*time.Second, "prometheus to be ready", func() bool {
		_, err := httpGet("http://" + promAddr + "/-/ready")
		return err == nil
	})

	// For each pid: the series of its leak, named by culprit, growing
	// over the last 20 seconds of samples.
	query := fmt.Sprintf(`leakscope_leak_outstanding_bytes{comm=%q,culprit="leak_request_buffer",kind="malloc"}[20s]`, name)
	var last string
	waitFor(t, 90*time.Second, "both pids' leak series to grow in Prometheus", func() bool {
		body, err := httpGet("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(query))
		if err != nil {
			last = err.Error()
			return false
		}
		last = body
		var resp struct {
			Status string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Values [][2]any
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Status != "success" {
			return false
		}
		growing := map[string]bool{}
		for _, r := range resp.Data.Result {
			if len(r.Values) < 5 {
				continue
			}
			firstV, _ := strconv.ParseFloat(r.Values[0][1].(string), 64)
			lastV, _ := strconv.ParseFloat(r.Values[len(r.Values)-1][1].(string), 64)
			growing[r.Metric["pid"]] = lastV > firstV && firstV > 0
		}
		return growing[strconv.Itoa(first.Process.Pid)] && growing[strconv.Itoa(second.Process.Pid)]
	})
	if t.Failed() {
		t.Logf("last answer: %s", last)
		return
	}
	t.Logf("Prometheus: %s", last)

	// go tool pprof, as a user would run it.
	ppStart := time.Now()
	pp := exec.Command("go", "tool", "pprof", "-traces", "http://"+agentAddr+"/debug/pprof/leaks")
	pp.Env = append(os.Environ(), "PPROF_TMPDIR="+dir) // HOME stays: go tool builds pprof into its cache
	out, err := pp.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	for _, want := range []string{"leak_request_buffer", strconv.Itoa(first.Process.Pid), strconv.Itoa(second.Process.Pid), name} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("go tool pprof's output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("go tool pprof (%s):\n%s", time.Since(ppStart).Round(time.Millisecond), out)

	// The agent detaches from a target that exits, serves its last
	// numbers, marked exited, for --keep-exited, then forgets it.
	_ = first.Process.Kill()
	_ = first.Wait()
	exitedLine := fmt.Sprintf(`leakscope_target_exited_timestamp_seconds{pid="%d"`, first.Process.Pid)
	waitFor(t, 15*time.Second, "the agent to detach from the first process", func() bool {
		body, err := httpGet("http://" + agentAddr + "/metrics")
		return err == nil && strings.Contains(body, "leakscope_agent_detaches_total 1\n") &&
			strings.Contains(body, exitedLine) && strings.Contains(body, "leakscope_agent_targets_exited 1\n") &&
			strings.Contains(body, fmt.Sprintf(`leakscope_leak_outstanding_bytes{pid="%d",comm="%s",runtime="native",cgroup=`, first.Process.Pid, name))
	})
	waitFor(t, 15*time.Second, "the agent to forget the first process", func() bool {
		body, err := httpGet("http://" + agentAddr + "/metrics")
		return err == nil && !strings.Contains(body, fmt.Sprintf(`pid="%d"`, first.Process.Pid)) &&
			strings.Contains(body, "leakscope_agent_targets_exited 0\n")
	})
}

// startAgent starts leakscope agent with args on a free port of
// 127.0.0.1, ends it with SIGTERM at the test's end (logging its stderr
// if the test failed), and returns its address.
func startAgent(t *testing.T, leakscope string, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var stderr bytes.Buffer
	agent := exec.Command(leakscope, append([]string{"agent", "--listen", addr}, args...)...)
	agent.Stderr = &stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent after SIGTERM: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = agent.Process.Kill()
			<-done
			t.Error("agent did not exit within 20s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("agent's log:\n%s", stderr.String())
		}
	})
	return addr
}

// A JVM gets zlib and direct buffers, not malloc: DirectLeak's 40 blocks of
// 64 KiB are exact, named by their Java method.
func TestAgentJVMDefaults(t *testing.T) {
	testutil.RequireBPF(t)
	java := testutil.RequireJava(t)
	classes := testutil.JavaClasses(t, filepath.Join("..", "..", "examples", "java", "DirectLeak.java"))
	leakscope, _ := buildAll(t, "leaky")
	flag := filepath.Join(t.TempDir(), "go")
	jvm := exec.Command(java, "-cp", classes, "DirectLeak", "--wait-file", flag, "--hold", "120000")
	if err := jvm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jvm.Process.Kill(); _ = jvm.Wait() })
	// pid= keeps the agent off every other JVM of the machine.
	addr := startAgent(t, leakscope, "--select", fmt.Sprintf("pid=%d,runtime=jvm", jvm.Process.Pid), "--interval", "1s", "--scan", "200ms")
	info := fmt.Sprintf(`leakscope_target_info{pid="%d",comm="java",runtime="jvm"`, jvm.Process.Pid)
	waitFor(t, 60*time.Second, "the agent to attach to the JVM", func() bool {
		body, err := httpGet("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, info)
	})
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`leakscope_leak_outstanding_count{pid="%d",comm="java",runtime="jvm",cgroup=`, jvm.Process.Pid)
	var body string
	waitFor(t, 60*time.Second, "the direct-buffer leak in /metrics", func() bool {
		var err error
		body, err = httpGet("http://" + addr + "/metrics")
		for _, line := range strings.Split(body, "\n") {
			if err == nil && strings.HasPrefix(line, want) && strings.Contains(line, `kind="jvm.direct",culprit="DirectLeak.leakBuffers"} 40`) {
				return true
			}
		}
		return false
	})
	if strings.Contains(body, `kind="malloc"`) {
		t.Errorf("a JVM's malloc is traced by default:\n%s", body)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

func TestProcCgroupAndRuntime(t *testing.T) {
	for data, want := range map[string]string{
		"0::/kubepods.slice/kubepods-pod12.slice/cri-containerd-ab.scope\n": "/kubepods.slice/kubepods-pod12.slice/cri-containerd-ab.scope",
		"12:memory:/docker/abc\n11:cpu:/docker/abc\n":                       "/docker/abc", // cgroup v1: the first hierarchy
		"12:memory:/v1\n0::/v2\n":                                           "/v2",
		"":                                                                  "", "garbage": "",
	} {
		if got := parseCgroup(data); got != want {
			t.Errorf("parseCgroup(%q) = %q, want %q", data, got, want)
		}
	}
	if got := procRuntime(os.Getpid()); got != "go" {
		t.Errorf("procRuntime(the test) = %q, want go", got)
	}
	sh := exec.Command("sleep", "10")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Process.Kill(); _ = sh.Wait() }()
	if got := procRuntime(sh.Process.Pid); got != "native" {
		t.Errorf("procRuntime(sleep) = %q, want native", got)
	}
	if isGoExecutable(os.DevNull) {
		t.Error("/dev/null is a Go executable")
	}
}

func httpGet(u string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// waitFor polls cond every 500ms until it holds, failing t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Errorf("timed out after %s waiting for %s", d, what)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("waited %s for %s", time.Since(start).Round(time.Millisecond), what)
}

// A process of the selected name that lives shorter than --interval is
// found by its exec event, attached to, and served after its exit with
// its last numbers (--keep-exited): one that sleeps 4 s (an attach takes
// over a second on a loaded machine), leaks 10 request buffers and exits
// is counted exactly. Then processes that leak
// a buffer every ~5 ms from their start and are stopped after N ms show
// how short a life is still seen: the agent sees what a process leaks
// once it is attached (symbolizing its objects takes a few hundred ms),
// so the shortest ones are missed; the table is logged, and one living
// 3 s must be seen.
func TestAgentShortLived(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, leaky := buildAll(t, "leaky")
	name := fmt.Sprintf("agshort%d", os.Getpid()%100000)
	prog := filepath.Join(t.TempDir(), name)
	if err := os.Link(leaky, prog); err != nil {
		t.Fatal(err)
	}
	addr := startAgent(t, leakscope, "--select", "comm="+name, "--sample-bytes", "off",
		"--keep-exited", "10m", "--log-format", "json")
	waitFor(t, 30*time.Second, "the agent to serve /metrics", func() bool {
		_, err := httpGet("http://" + addr + "/metrics")
		return err == nil
	})
	// leakValue is the agent's leakscope_leak_outstanding_<what> of
	// culprit leak_request_buffer for pid, and whether it marks pid exited.
	leakValue := func(pid int, what string) (v float64, found, exited bool) {
		body, err := httpGet("http://" + addr + "/metrics")
		if err != nil {
			return 0, false, false
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, fmt.Sprintf(`leakscope_target_exited_timestamp_seconds{pid="%d"`, pid)) {
				exited = true
			}
			if strings.HasPrefix(line, fmt.Sprintf(`leakscope_leak_outstanding_%s{pid="%d"`, what, pid)) &&
				strings.Contains(line, `culprit="leak_request_buffer"`) {
				v, _ = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				found = true
			}
		}
		return v, found, exited
	}

	exact := exec.Command(prog, "--pause-before", "4000", "--messages", "100", "--requests", "10", "--tags", "0")
	var out bytes.Buffer
	exact.Stderr = &out
	start := time.Now()
	if err := exact.Run(); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out.String())
	}
	lived := time.Since(start)
	if !strings.Contains(out.String(), "leaked 10 blocks, 40960 bytes in leak_request_buffer") {
		t.Fatalf("%s's summary: %s", name, out.String())
	}
	var count, nbytes float64
	waitFor(t, 10*time.Second, "the exited process's last numbers", func() bool {
		var found, exited bool
		count, found, exited = leakValue(exact.Process.Pid, "count")
		nbytes, _, _ = leakValue(exact.Process.Pid, "bytes")
		return found && exited
	})
	t.Logf("a process that lived %s (leaking 10 blocks, 40960 bytes, after 4 s): the agent served %.0f blocks, %.0f bytes after its exit", lived.Round(time.Millisecond), count, nbytes)
	if count != 10 || nbytes != 40960 {
		t.Errorf("agent: %.0f blocks, %.0f bytes of leak_request_buffer; want 10, 40960", count, nbytes)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%8s %8s %12s %s\n", "stop ms", "lived ms", "leaked", "seen")
	var seen3s bool
	for _, ms := range []int{100, 200, 300, 500, 700, 1000, 3000} {
		p := exec.Command(prog, "--messages", "100", "--requests", "1", "--tags", "0", "--forever", "--interval", "5")
		var out bytes.Buffer
		p.Stderr = &out
		start := time.Now()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		_ = p.Process.Signal(syscall.SIGTERM)
		_ = p.Wait()
		lived := time.Since(start)
		m := regexp.MustCompile(`leaked (\d+) blocks, \d+ bytes in leak_request_buffer`).FindStringSubmatch(out.String())
		leaked := "?"
		if m != nil {
			leaked = m[1]
		}
		// The exit reaches the agent within a scan; an attach still
		// running when the process exited has failed by then.
		var v float64
		var found, exited bool
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && !exited {
			v, found, exited = leakValue(p.Process.Pid, "count")
			time.Sleep(200 * time.Millisecond)
		}
		res := "not attached"
		if exited {
			res = fmt.Sprintf("%.0f blocks", v)
			if !found {
				res = "attached, no leak recorded"
			}
		}
		if ms == 3000 {
			seen3s = found && v > 0
		}
		fmt.Fprintf(&table, "%8d %8d %12s %s\n", ms, lived.Milliseconds(), leaked, res)
	}
	t.Logf("processes leaking a 4096-byte block every ~5 ms, stopped after N ms:\n%s", table.String())
	if !seen3s {
		t.Errorf("a process that lived 3 s was not seen leaking:\n%s", table.String())
	}
}
