//go:build linux && amd64

package probe

import (
	"slices"
	"testing"
)

// treeWarnings says each object's unnamed frames once, summed over the
// processes that had them (the root's with them), and the other
// processes' execs once; a note of one child alone names it.
func TestTreeWarningsSayEachOnce(t *testing.T) {
	bash := func(n int) unnamedFrames {
		return unnamedFrames{module: "/usr/bin/bash", buildID: "b1", why: "debuginfod is not configured", frames: n}
	}
	child := func(pid int, n treeNotes) *followed { return &followed{t: &Tracer{pid: pid}, notes: n} }
	procs := []*followed{
		child(11, treeNotes{unnamed: []unnamedFrames{bash(5)}, execs: 2, preExec: preExec{count: 4, bytes: 100}}),
		child(12, treeNotes{unnamed: []unnamedFrames{bash(7), {module: "/usr/bin/readlink", buildID: "r1", why: "w", frames: 3}}}),
		child(13, treeNotes{unnamed: []unnamedFrames{bash(1)}, execs: 1, preExec: preExec{count: 1, bytes: 24}}),
		child(14, treeNotes{unnamed: []unnamedFrames{bash(2)}}),
	}
	got := treeWarnings(10, []unnamedFrames{bash(10)}, procs)
	want := []string{
		"25 frame(s) in /usr/bin/bash are unnamed in 5 processes (pids 10, 11, 12 and 2 more): it has no symbols (build id b1) and no debug file in /usr/lib/debug; debuginfod is not configured",
		"pid 12: 3 frame(s) in /usr/bin/readlink are unnamed: it has no symbols (build id r1) and no debug file in /usr/lib/debug; w",
		"2 other processes of the command (pids 11, 13) exec'd during the capture, 3 times in all: 5 allocations (124 B) their earlier images still held went with the execs and are not reported as leaks",
	}
	if !slices.Equal(got, want) {
		t.Errorf("treeWarnings =\n%q\nwant\n%q", got, want)
	}
	got = treeWarnings(10, []unnamedFrames{bash(10)}, procs[3:])
	want = []string{"12 frame(s) in /usr/bin/bash are unnamed in 2 processes (pids 10, 14): it has no symbols (build id b1) and no debug file in /usr/lib/debug; debuginfod is not configured"}
	if !slices.Equal(got, want) {
		t.Errorf("treeWarnings =\n%q\nwant\n%q", got, want)
	}
	got = treeWarnings(10, nil, procs[:1])
	want = []string{
		"pid 11: 5 frame(s) in /usr/bin/bash are unnamed: it has no symbols (build id b1) and no debug file in /usr/lib/debug; debuginfod is not configured",
		"pid 11 exec'd during the capture (2 time(s)): 4 allocations (100 B) its earlier image(s) still held went with the exec and are not reported as leaks",
	}
	if !slices.Equal(got, want) {
		t.Errorf("treeWarnings =\n%q\nwant\n%q", got, want)
	}
	// Processes that forked and exec'd at once held nothing that went
	// with the exec: no warning.
	got = treeWarnings(10, nil, []*followed{child(15, treeNotes{execs: 1}), child(16, treeNotes{execs: 2})})
	if len(got) != 0 {
		t.Errorf("treeWarnings of execs that lost nothing = %q, want none", got)
	}
	if got := treeWarnings(10, []unnamedFrames{bash(3)}, nil); !slices.Equal(got, []string{bash(3).warning(nil)}) {
		t.Errorf("the root alone: %q, want its own warning", got)
	}
}

// Objects that share a cause (stripped programs, debuginfod not
// configured) are said in one warning, those with the most frames named
// first and the rest counted; an object with a cause of its own keeps its
// own warning.
func TestUnnamedObjectsOfOneCauseAreOneWarning(t *testing.T) {
	const why = "debuginfod is not configured"
	obj := func(module string, frames int, pids ...int) unnamedObject {
		return unnamedObject{u: unnamedFrames{module: module, buildID: "id-" + module, why: why, frames: frames}, pids: pids}
	}
	objects := []unnamedObject{
		obj("/a", 3, 10),
		obj("/b", 40, 10, 11, 12, 13, 14),
		{u: unnamedFrames{module: "/c", buildID: "c1", why: "fetch failed: 404", frames: 2}, pids: []int{12}},
		obj("/d", 7, 11),
		obj("/e", 1, 10),
		obj("/f", 9, 10, 12),
		obj("/g", 5, 10),
		obj("/h", 2, 13),
	}
	got := unnamedWarnings(objects, 10)
	want := []string{
		"frames in 7 objects are unnamed: none has symbols or a debug file in /usr/lib/debug; debuginfod is not configured: " +
			"40 in /b (5 processes: pids 10, 11, 12 and 2 more), 9 in /f (2 processes: pids 10, 12), 7 in /d (pid 11), 5 in /g, 3 in /a, and 3 frame(s) in 2 more objects",
		"pid 12: 2 frame(s) in /c are unnamed: it has no symbols (build id c1) and no debug file in /usr/lib/debug; fetch failed: 404",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unnamedWarnings =\n%q\nwant\n%q", got, want)
	}
	// The process traced alone (no tree): no pids.
	got = unnamedWarnings([]unnamedObject{obj("/a", 3), obj("/b", 4)}, 10)
	want = []string{"frames in 2 objects are unnamed: none has symbols or a debug file in /usr/lib/debug; debuginfod is not configured: 4 in /b, 3 in /a"}
	if !slices.Equal(got, want) {
		t.Errorf("unnamedWarnings of one process =\n%q\nwant\n%q", got, want)
	}
}
