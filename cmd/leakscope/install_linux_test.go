package main

import (
	"debug/elf"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install PREFIX=DIR installs a static binary that says which commit
// it is, man pages man reads without a warning, and completion scripts the
// shells load. The build goes to a temporary directory (BIN, GEN), not to
// the checkout's bin/.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "builds and installs leakscope: skipped in -short mode")
	}
	for _, tool := range []string{"make", "git", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make deps): %v", tool, err)
		}
	}
	tmp := t.TempDir()
	prefix := filepath.Join(tmp, "prefix")
	mk := exec.Command("make", "-C", "../..", "install", "PREFIX="+prefix,
		"BIN="+filepath.Join(tmp, "build", "leakscope"), "GEN="+filepath.Join(tmp, "gen"))
	if b, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, b)
	}
	bin := filepath.Join(prefix, "bin", "leakscope")

	// The binary: static (no interpreter), and it names its build.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not a static binary", bin)
		}
	}
	f.Close()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("leakscope version: %v", err)
	}
	describe, _ := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	head, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	for _, w := range []string{
		"leakscope " + strings.TrimSpace(string(describe)) + "\n",
		"commit:  " + strings.TrimSpace(string(head)),
		", cgo off\n",
		"bpf:     linux/amd64 (probe/kernel/leak_x86_bpfel.o)\n",
	} {
		if !strings.Contains(string(out), w) {
			t.Errorf("installed leakscope version printed\n%s\nwant %q in it", out, w)
		}
	}
	if strings.Contains(string(out), "built:   unknown") {
		t.Errorf("no build date:\n%s", out)
	}

	// A man page per command, read by man without a warning.
	pages, _ := filepath.Glob(filepath.Join(prefix, "share", "man", "man1", "*.1"))
	want := map[string]bool{"leakscope.1": false, "leakscope-run.1": false, "leakscope-attach.1": false,
		"leakscope-report.1": false, "leakscope-diff.1": false, "leakscope-doctor.1": false, "leakscope-version.1": false}
	man, manErr := exec.LookPath("man")
	for _, p := range pages {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "leakscope-__") {
			t.Errorf("a hidden command has a page: %s", base)
		}
		want[base] = true
		title := strings.ToUpper(strings.TrimSuffix(base, ".1")) + "(1)"
		if manErr != nil {
			b, _ := os.ReadFile(p)
			if !strings.HasPrefix(string(b), `.TH "`+strings.TrimSuffix(title, "(1)")+`" "1"`) {
				t.Errorf("%s does not start with its .TH header: %.60q", base, b)
			}
			continue
		}
		cmd := exec.Command(man, "--warnings", "-l", "-Tutf8", p)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		text, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s", base, err, stderr.String())
		}
		// man squeezes a long title into the header line's middle.
		if !strings.HasPrefix(strings.TrimSpace(string(text)), strings.TrimSuffix(title, "(1)")) {
			t.Errorf("man -l %s does not start with %s:\n%.300s", base, title, text)
		}
	}
	if manErr != nil {
		t.Logf("man is not installed (make deps installs man-db): checked the .TH headers only")
	}
	for page, found := range want {
		if !found {
			t.Errorf("no %s installed", page)
		}
	}

	// bash loads the completion script and, through the installed binary,
	// completes a flag value. The script needs the bash-completion package
	// (make deps installs it), as it does on a user's machine.
	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Fatalf("the bash-completion package is needed (make deps): %v", err)
	}
	bashScript := filepath.Join(prefix, "share", "bash-completion", "completions", "leakscope")
	script := `source ` + bashCompletion + ` && source "$1" && complete -p leakscope &&
COMP_WORDS=(leakscope attach --format j); COMP_CWORD=3; COMP_LINE='leakscope attach --format j'; COMP_POINT=${#COMP_LINE}
__start_leakscope leakscope j --format; printf 'reply:%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script, "bash", bashScript)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "-F __start_leakscope leakscope") || !strings.Contains(string(b), "reply:json") {
		t.Errorf("bash completion: %v\n%s", err, b)
	}
	for shell, path := range map[string]string{
		"zsh":  filepath.Join(prefix, "share", "zsh", "site-functions", "_leakscope"),
		"fish": filepath.Join(prefix, "share", "fish", "vendor_completions.d", "leakscope.fish"),
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s completion: %v", shell, err)
			continue
		}
		if first := map[string]string{"zsh": "#compdef leakscope", "fish": "# fish completion for leakscope"}[shell]; !strings.HasPrefix(string(b), first) {
			t.Errorf("%s completion starts %.40q, want %q", shell, b, first)
		}
		if sh, err := exec.LookPath(shell); err == nil {
			if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s", shell, path, err, out)
			}
		}
	}
}
