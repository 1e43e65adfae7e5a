package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Set by the Makefile with -ldflags -X (see LDFLAGS there); empty in a
// plain go build, which falls back to what the Go toolchain stamped.
var (
	version   string // git describe --tags --always --dirty
	commit    string // full commit hash
	buildDate string // RFC 3339, UTC
)

// bpfObjects are the committed bpf2go objects this source tree embeds, by
// GOARCH: probe/kernel/gen.go's -target list. TestBPFObjectsListed keeps it in
// step with the files in probe/kernel/.
var bpfObjects = []struct{ arch, object string }{
	{"amd64", "probe/kernel/leak_x86_bpfel.o"},
	{"arm64", "probe/kernel/leak_arm64_bpfel.o"},
}

// buildInfo says which build a binary is, for bug reports.
type buildInfo struct {
	Version   string // a release, git describe output, or "devel"
	Commit    string // "" when unknown
	Modified  bool   // built from a tree with uncommitted changes
	Date      string // build date (-ldflags) or else the commit's time; "" when unknown
	GoVersion string
	Platform  string // GOOS/GOARCH
	CGO       bool   // built with cgo
	BPF       []string
}

// readBuildInfo merges the Makefile's -ldflags values with the toolchain's
// stamp (runtime/debug.ReadBuildInfo: the module version of a go install
// pkg@version, vcs.revision, vcs.time and vcs.modified of a build in a git
// checkout). An -ldflags value wins.
func readBuildInfo() buildInfo {
	b := buildInfo{
		Version:   version,
		Commit:    commit,
		Date:      buildDate,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	var vcsTime string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "CGO_ENABLED":
				b.CGO = s.Value == "1"
			}
		}
	}
	if strings.HasSuffix(b.Version, "-dirty") || strings.HasSuffix(b.Version, "+dirty") {
		b.Modified = true
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Date == "" {
		b.Date = vcsTime
	}
	for _, o := range bpfObjects {
		if canTrace && o.arch == runtime.GOARCH {
			b.BPF = append(b.BPF, fmt.Sprintf("linux/%s (%s)", o.arch, o.object))
		}
	}
	if len(b.BPF) == 0 {
		b.BPF = []string{"none in this build (tracing needs linux/amd64)"}
	}
	return b
}

// write prints b as `leakscope version` and --version do.
func (b buildInfo) write(w io.Writer) {
	unknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	c := unknown(b.Commit)
	if b.Modified {
		c += " (modified)"
	}
	cgo := "off"
	if b.CGO {
		cgo = "on"
	}
	fmt.Fprintf(w, "leakscope %s\n", b.Version)
	fmt.Fprintf(w, "commit:  %s\n", c)
	fmt.Fprintf(w, "built:   %s\n", unknown(b.Date))
	fmt.Fprintf(w, "go:      %s %s, cgo %s\n", b.GoVersion, b.Platform, cgo)
	fmt.Fprintf(w, "bpf:     %s\n", strings.Join(b.BPF, ", "))
}

func newVersionCmd(io ioStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, Go version and BPF object targets",
		Long: `version prints which build this binary is: its version (git describe of the
checkout it was built from, or the module version), commit (marked modified
when built from a tree with uncommitted changes), build date, the Go
toolchain, GOOS/GOARCH and whether cgo was on, and the targets of the BPF
objects it embeds. --version prints the same. Quote it in a bug report.`,
		Example: `  leakscope version
  leakscope --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			readBuildInfo().write(io.Out)
			return nil
		},
	}
}

// addVersionFlag gives root --version, printing what version prints.
func addVersionFlag(root *cobra.Command) {
	var sb strings.Builder
	b := readBuildInfo()
	b.write(&sb)
	root.Version = b.Version
	// The template is text/template: keep the braces of the output inert.
	root.SetVersionTemplate(strings.NewReplacer("{{", `{{"{{"}}`).Replace(sb.String()))
	root.Flags().Bool("version", false, "print the version, commit, build date, Go version and BPF object targets")
}
