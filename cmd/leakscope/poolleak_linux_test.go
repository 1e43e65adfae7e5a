package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
	"github.com/leakscope/leakscope/report"
)

// Ground truth of examples/c/poolleak.c with default arguments.
const (
	poolLeakBlocks = 80
	poolLeakBytes  = 80 * 16384
	poolBlocks     = 64
	poolBytes      = 64 * 65536
)

// A cache that fills once and a smaller leak that keeps growing: with
// snapshots, the leak ranks first, the cache is listed whole and flat, and
// a growth gate names the leak only.
func TestPoolVsLeak(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "poolleak")
	cmd := exec.Command(leakscope, "run", "--interval", "200ms", "--format", "json", "--fail-on", "growth>100B/s", "--", prog)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1 (the growth rule matches the leak)\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("poolleak: leaked %d blocks, %d bytes in leak_slowly; leaked %d blocks, %d bytes in cache_fill_slot;",
		poolLeakBlocks, poolLeakBytes, poolBlocks, poolBytes)
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("the example did not report its ground truth %q:\n%s", want, stderr.String())
	}
	r, err := parseReport(&stdout)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}

	if len(r.Leaks) < 2 {
		t.Fatalf("%d leaks, want the leak and the cache: %+v", len(r.Leaks), r.Leaks)
	}
	leak := r.Leaks[0]
	if leak.Rank != 1 || leak.Kind != "malloc" || leak.Frames[0].Function != "leak_slowly" ||
		leak.OutstandingCount != poolLeakBlocks || leak.OutstandingBytes != poolLeakBytes ||
		leak.Allocs != poolLeakBlocks || leak.Frees != 0 {
		t.Errorf("rank 1 = %s %d live, %d bytes, %d allocs, %d frees; want leak_slowly with %d blocks, %d bytes",
			topFunction(leak), leak.OutstandingCount, leak.OutstandingBytes, leak.Allocs, leak.Frees, poolLeakBlocks, poolLeakBytes)
	}
	if leak.Trend == nil || leak.Trend.Plateau || leak.GrowthBytesPerSecond == nil || *leak.GrowthBytesPerSecond <= 100 {
		t.Errorf("leak trend = %+v, growth %v; want growing, no plateau", leak.Trend, leak.GrowthBytesPerSecond)
	}

	var pools []report.V1Leak
	for _, l := range r.Leaks {
		if topFunction(l) == "cache_fill_slot" {
			pools = append(pools, l)
		}
	}
	if len(pools) != 1 {
		t.Fatalf("%d cache_fill_slot rows, want 1", len(pools))
	}
	pool := pools[0]
	if pool.Rank <= leak.Rank || pool.OutstandingCount != poolBlocks || pool.OutstandingBytes != poolBytes || pool.Frees != 0 {
		t.Errorf("cache = rank %d, %d live, %d bytes; want below the leak with %d blocks, %d bytes",
			pool.Rank, pool.OutstandingCount, pool.OutstandingBytes, poolBlocks, poolBytes)
	}
	if pool.Score <= leak.Score {
		t.Errorf("cache score %.0f is not above the leak's %.0f: ranking by size alone would not put the cache first", pool.Score, leak.Score)
	}
	if pool.Trend == nil || !pool.Trend.Plateau {
		t.Errorf("cache trend = %+v, want a plateau", pool.Trend)
	}
	if !slices.ContainsFunc(pool.Reasons, func(s string) bool { return strings.HasPrefix(s, "flat for the last ") }) {
		t.Errorf("cache reasons %q do not mention a plateau", pool.Reasons)
	}

	// The gate: one stderr line per matching row; the leak's, never the
	// cache's.
	var gate []string
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "leakscope: --fail-on ") {
			gate = append(gate, line)
		}
	}
	if !slices.ContainsFunc(gate, func(s string) bool {
		return strings.Contains(s, `"growth>100B/s" matched rank 1: malloc, 80 live, 1.2 MiB, in leak_slowly`)
	}) {
		t.Errorf("the gate does not name leak_slowly: %q", gate)
	}
	if slices.ContainsFunc(gate, func(s string) bool { return strings.Contains(s, "cache_fill_slot") }) {
		t.Errorf("the gate names the cache: %q", gate)
	}
}

func topFunction(l report.V1Leak) string {
	if len(l.Frames) == 0 {
		return ""
	}
	return l.Frames[0].Function
}

// leakscope killed (-9) while it saves a capture leaves a file whose last
// record may be cut short; report still renders it, up to the last whole
// snapshot, and warns that it is incomplete.
func TestKilledCaptureReport(t *testing.T) {
	testutil.RequireBPF(t)
	leakscope, prog := buildAll(t, "poolleak")
	dir := t.TempDir()
	capture := filepath.Join(dir, "killed.capture")
	out, err := os.Create(filepath.Join(dir, "run.out")) // files, not pipes: Wait must not wait for the orphaned target
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(leakscope, "run", "--interval", "200ms", "--save", capture, "--", prog, "--forever")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) }) // the target outlives leakscope

	// Kill leakscope, and only it, once the capture holds a few snapshots
	// after the cache is full (5 at 200 ms).
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(capture)
		if n, _ := lastSnapshot(t, data); n >= 6 {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("no 6 snapshots in %s within 60s; leakscope says:\n%s", capture, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("leakscope after SIGKILL: %v", err)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)

	data, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	// The file as the kill left it, and the same with its last record cut
	// in half, as a kill in the middle of a write leaves it.
	cut := filepath.Join(dir, "cut.capture")
	body := bytes.TrimSuffix(data, []byte("\n"))
	last := bytes.LastIndexByte(body, '\n') + 1
	if err := os.WriteFile(cut, body[:last+(len(body)-last)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{capture, cut} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			n, rows := lastSnapshot(t, data)
			t.Logf("%d whole snapshots; the last holds %v", n, rows)
			if rows["cache_fill_slot"] != [2]uint64{poolBlocks, poolBytes} || rows["leak_slowly"][0] == 0 {
				t.Fatalf("snapshot %d of the capture holds %v, want the full cache and some leak", n, rows)
			}

			cmd := exec.Command(leakscope, "report", "--format", "json", file)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("report: %v\n%s", err, stderr.String())
			}
			r, err := parseReport(&stdout)
			if err != nil {
				t.Fatal(err)
			}
			warning := fmt.Sprintf("capture is incomplete: ends after snapshot %d (the tracer was interrupted)", n)
			if !slices.Contains(r.Warnings, warning) {
				t.Errorf("warnings = %q, want %q", r.Warnings, warning)
			}
			got := map[string][2]uint64{}
			for _, l := range r.Leaks {
				v := got[topFunction(l)]
				got[topFunction(l)] = [2]uint64{v[0] + l.OutstandingCount, v[1] + l.OutstandingBytes}
			}
			if fmt.Sprint(got) != fmt.Sprint(rows) {
				t.Errorf("report rows (function: count, bytes) = %v, want snapshot %d's %v", got, n, rows)
			}
			if r.Leaks[0].Trend == nil || r.Leaks[0].Trend.Points != n {
				t.Errorf("rank 1 trend = %+v, want %d points", r.Leaks[0].Trend, n)
			}

			// The text report says so too.
			text, err := exec.Command(leakscope, "report", file).CombinedOutput()
			if err != nil {
				t.Fatalf("report: %v\n%s", err, text)
			}
			if !strings.Contains(string(text), "warning:     "+warning) || !strings.Contains(string(text), "leak_slowly") {
				t.Errorf("text report:\n%s", text)
			}
		})
	}
}

// lastSnapshot reads a capture file as its format documents it (JSON
// lines; the last line may be cut short), without analyze: it returns how
// many snapshots are whole and the live count and bytes of the last one
// per top function, for the sites that hold something.
func lastSnapshot(t *testing.T, data []byte) (int, map[string][2]uint64) {
	t.Helper()
	type point struct {
		ID        uint64 `json:"id"`
		LiveCount uint64 `json:"live_count"`
		LiveBytes uint64 `json:"live_bytes"`
	}
	var rec struct {
		Type string `json:"type"`
		Site *struct {
			ID    uint64 `json:"id"`
			Stack struct {
				Frames []struct {
					Function string `json:"function"`
				} `json:"frames"`
			} `json:"stack"`
		} `json:"site"`
		Snapshot *struct {
			Sites []point `json:"sites"`
		} `json:"snapshot"`
	}
	top := map[uint64]string{}
	var n int
	points := map[uint64]point{} // the snapshot as the records so far make it
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		rec.Type, rec.Site, rec.Snapshot = "", nil, nil
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue // a line cut short
		}
		switch {
		case rec.Type == "site" && rec.Site != nil && len(rec.Site.Stack.Frames) > 0:
			top[rec.Site.ID] = rec.Site.Stack.Frames[0].Function
		case rec.Type == "snapshot" && rec.Snapshot != nil:
			n++
			clear(points)
			for _, p := range rec.Snapshot.Sites {
				points[p.ID] = p
			}
		case rec.Type == "delta" && rec.Snapshot != nil:
			// Only the sites that changed; all zeros: no longer listed.
			n++
			for _, p := range rec.Snapshot.Sites {
				points[p.ID] = p
			}
		case rec.Type == "end":
			t.Fatalf("the capture has an end record: leakscope was not killed in time")
		}
	}
	rows := map[string][2]uint64{}
	for _, p := range points {
		if p.LiveCount == 0 {
			continue
		}
		v := rows[top[p.ID]]
		rows[top[p.ID]] = [2]uint64{v[0] + p.LiveCount, v[1] + p.LiveBytes}
	}
	return n, rows
}
