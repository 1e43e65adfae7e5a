package probe

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLayers holds the tracer's layers to importing downwards only, as
// `go list -deps` sees them for linux/amd64 (where every file builds):
// probe/kernel, the one user of the BPF object, knows neither the tracer,
// the uprobe attachment, the process image nor stack resolution;
// probe/uprobe, which attaches the kernel's programs to an object's
// functions, knows neither the tracer, the process image nor stack
// resolution; probe/target, one process image, knows neither the tracer
// nor the uprobe attachment; probe/stacks, frames from raw addresses,
// knows neither the tracer, the kernel layer, the uprobe attachment, the
// process image nor BPF; analyze and report, which read captures on any
// OS, know nothing of tracing.
func TestLayers(t *testing.T) {
	const mod = "github.com/leakscope/leakscope/"
	for _, c := range []struct {
		pkg string
		// exact are packages it must not import; under, trees it must
		// import nothing of.
		exact, under []string
	}{
		{pkg: "probe/kernel", exact: []string{mod + "probe", mod + "probe/target", mod + "probe/stacks", mod + "probe/uprobe"}},
		{pkg: "probe/uprobe", exact: []string{mod + "probe", mod + "probe/target", mod + "probe/stacks"}},
		{pkg: "probe/target", exact: []string{mod + "probe", mod + "probe/uprobe"}},
		{pkg: "probe/zlib", exact: []string{mod + "probe", mod + "probe/target", mod + "probe/stacks"}},
		{pkg: "probe/stacks", exact: []string{mod + "probe", mod + "probe/kernel", mod + "probe/target", mod + "probe/uprobe"}, under: []string{"github.com/cilium/ebpf"}},
		{pkg: "analyze", under: []string{mod + "probe", "github.com/cilium/ebpf"}},
		{pkg: "report", under: []string{mod + "probe", "github.com/cilium/ebpf"}},
	} {
		t.Run(c.pkg, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", mod+c.pkg)
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", c.pkg, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 || deps[len(deps)-1] != mod+c.pkg {
				t.Fatalf("go list -deps %s listed %d packages, not ending with it", c.pkg, len(deps))
			}
			for _, d := range deps {
				for _, x := range c.exact {
					if d == x {
						t.Errorf("%s imports %s", c.pkg, d)
					}
				}
				for _, x := range c.under {
					if d == x || strings.HasPrefix(d, x+"/") {
						t.Errorf("%s imports %s", c.pkg, d)
					}
				}
			}
		})
	}
}
