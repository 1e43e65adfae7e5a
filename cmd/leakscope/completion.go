package main

import (
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe"
	"github.com/leakscope/leakscope/probe/track"
)

// Shell completion (leakscope completion bash|zsh|fish, which cobra
// adds): cobra completes command and flag names; addCompletions adds the
// values. It walks the finished command tree and registers by flag name,
// so a command that gains a flag of a name below gets its completion
// without an edit here. A flag with no function registered completes
// file names, cobra's default, except numbers, durations and booleans.

// completionValues are the enumerated flag values, "VALUE\tdescription"
// as cobra passes them to the shell. TestCompletionValuesAccepted runs
// every one through the command's own validation.
var completionValues = map[string][]string{
	"format": {
		formats[0] + "\ttable and stacks",
		formats[1] + "\tv1 JSON report (docs/json-report.md)",
		formats[2] + "\tone self-contained page",
		formats[3] + "\tgzipped profile.proto for go tool pprof; needs -o",
	},
	"malloc": {
		probe.MallocAuto + "\ton, except for a JVM target",
		probe.MallocOn + "\ttrace the malloc family",
		probe.MallocOff + "\tno allocator probes",
	},
	"unwind": {
		probe.UnwindAuto + "\tframe pointers where kept, .eh_frame elsewhere",
		probe.UnwindFP + "\tframe pointers",
		probe.UnwindDWARF + "\t.eh_frame unwind tables",
	},
	"group-by": {
		string(analyze.GroupByStack) + "\tone leak per call stack",
		string(analyze.GroupByFrame) + "\tone leak per first frame outside allocators",
	},
	"log-format": {
		"text\tkey=value lines",
		"json\tone JSON object a line",
	},
	"progress": {
		"auto\twhen stderr is a terminal",
		"always",
		"never",
	},
}

// noFileFlags take a value that is not a file name.
var noFileFlags = []string{"http", "fail-on", "focus", "ignore", "culprit-skip", "pool-frame", "sample-bytes", "sample-exact", "max-input", "memory-limit", "select", "listen", "max-history"}

// captureExt is the file name extension completed for a capture; the
// docs name captures *.capture, and any other name can still be typed.
const captureExt = "capture"

func addCompletions(root *cobra.Command) {
	flagFuncs := map[string]cobra.CompletionFunc{
		"pid":          completePids,
		"track":        completeTrack,
		"kind":         completeKinds,
		"output":       cobra.FixedCompletions(nil, cobra.ShellCompDirectiveDefault),
		"save":         cobra.FixedCompletions(nil, cobra.ShellCompDirectiveDefault),
		"goroutines":   cobra.FixedCompletions(nil, cobra.ShellCompDirectiveDefault),
		"report-dir":   cobra.FixedCompletions(nil, cobra.ShellCompDirectiveFilterDirs),
		"track-file":   cobra.FixedCompletions([]string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt),
		"memory-limit": cobra.NoFileCompletions,
	}
	for name, values := range completionValues {
		flagFuncs[name] = completeFrom(values)
	}
	for _, name := range noFileFlags {
		if _, ok := flagFuncs[name]; !ok {
			flagFuncs[name] = cobra.NoFileCompletions
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		register := func(f *pflag.Flag) {
			fn, ok := flagFuncs[f.Name]
			if !ok {
				switch f.Value.Type() {
				case "bool", "int", "uint32", "uint64", "duration":
					fn = cobra.NoFileCompletions
				default:
					return
				}
			}
			if _, exists := c.GetFlagCompletionFunc(f.Name); !exists {
				_ = c.RegisterFlagCompletionFunc(f.Name, fn)
			}
		}
		c.Flags().VisitAll(register)
		c.PersistentFlags().VisitAll(register)
		if c.ValidArgsFunction == nil {
			switch c.Name() {
			case "report":
				c.ValidArgsFunction = completeCaptures(1)
			case "diff":
				c.ValidArgsFunction = completeCaptures(2)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeFrom completes the values that start with what was typed.
func completeFrom(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeCaptures completes capture files for the first n arguments.
func completeCaptures(n int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return []cobra.Completion{captureExt}, cobra.ShellCompDirectiveFilterFileExt
	}
}

// completeTrack completes preset:NAME, after a comma too
// (preset:bzip2,preset:stdio).
func completeTrack(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	head, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		head, last = toComplete[:i+1], toComplete[i+1:]
	}
	var out []cobra.Completion
	for _, name := range track.Presets() {
		if v := "preset:" + name; strings.HasPrefix(v, last) {
			out = append(out, head+v)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeKinds completes --kind with the kinds leakscope can report:
// malloc, zlib's, and those of every preset.
func completeKinds(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	kinds := map[string]bool{"malloc": true, "zlib.inflate": true, "zlib.deflate": true, "zlib.*": true}
	for _, name := range track.Presets() {
		ps, _ := track.PresetPairs(name)
		for _, p := range ps {
			kinds[p.Kind] = true
			if i := strings.IndexByte(p.Kind, '.'); i > 0 {
				kinds[p.Kind[:i]+".*"] = true
			}
		}
	}
	var out []cobra.Completion
	for k := range kinds {
		if strings.HasPrefix(k, toComplete) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completePids completes the live processes that can be traced, as
// "PID\tcomm", lowest pid first: kernel threads (no command line) and
// this process are left out.
func completePids(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return pidCompletions("/proc", toComplete, os.Getpid()), cobra.ShellCompDirectiveNoFileComp
}

func pidCompletions(proc, prefix string, self int) []cobra.Completion {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	var out []cobra.Completion
	for _, pid := range pids {
		dir := proc + "/" + strconv.Itoa(pid)
		if cmdline, err := os.ReadFile(dir + "/cmdline"); err != nil || len(cmdline) == 0 {
			continue // a kernel thread, a zombie, or gone
		}
		comm, err := os.ReadFile(dir + "/comm")
		if err != nil {
			continue
		}
		out = append(out, cobra.CompletionWithDesc(strconv.Itoa(pid), strings.TrimSuffix(string(comm), "\n")))
	}
	return out
}
