package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/analyze"
)

// agentOptions are the flags of agent: attach's probe flags, with
// always-on defaults, plus what selects targets and what serves them.
type agentOptions struct {
	captureOptions
	Selects   []string
	selectors []selector
	// Listen is the HTTP address of /metrics, /debug/pprof/leaks and
	// /report; ListenAllowRemote lets it be other than loopback.
	Listen            string
	ListenAllowRemote bool
	Scan              time.Duration // how often /proc is read for new processes
	KeepExited        time.Duration // how long an exited target's last numbers are served
	MaxTargets        int
	MaxTargetSites    int   // sites kept per target before folding into "other"
	MaxHistory        int64 // bytes of snapshot history over all targets
	maxHistory        string
	LogFormat         string
}

// Agent defaults: a snapshot every 10s, malloc sampled one per 512 KiB
// (a JVM's malloc is not traced at all, --malloc auto), kernel tables a
// quarter of attach's (each target holds its own).
const (
	agentInterval       = 10 * time.Second
	agentSampleBytes    = "512KiB"
	agentMaxAllocations = 1 << 18
	agentMaxSites       = 1 << 14
	agentMaxStacks      = 1 << 14
	agentMaxTargets     = 16
	agentMaxTargetSites = 512
	agentMaxHistory     = "32MiB"
	agentScan           = 500 * time.Millisecond
	agentKeepExited     = time.Minute
)

func newAgentCmd(io ioStreams, runF func(context.Context, *agentOptions) error) *cobra.Command {
	opts := &agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent --select EXPR [--select EXPR...] [flags]",
		Short: "Trace every matching process, continuously, for Prometheus and pprof scrapers",
		Long: `agent runs in the foreground until SIGTERM or Ctrl-C (systemd, a container).
It attaches to each process that one of the --select expressions matches,
including those that start later (found as they exec, by the kernel's
process events, and every --scan by reading /proc) and a service's
replacement after a restart, and detaches when it exits, serving its last
numbers for --keep-exited (1m).

A --select expression is one or more terms joined by ',', all of which must
match; a process matching any --select is traced:

  comm=NAME      the command name (/proc/PID/comm; * and ? match any text)
  exe=GLOB       the executable's path, or its base name when GLOB has no /
  runtime=R      jvm, go or native
  cgroup=GLOB    the cgroup v2 path, e.g. '*kubepods*pod<UID>*' for a pod,
                 '/system.slice/app.service'
  pid=N          one process

Per target, the probes are chosen for always-on cost: zlib streams,
mappings and threads (--maps, on by default here) and malloc sampled one
per --sample-bytes (512KiB; 'off' traces every one) for native and Go
programs, zlib, direct buffers, mappings and threads for a JVM (--malloc
auto).
Its history is kept in windows of decreasing resolution (15 minutes at
--interval, 6 hours at a minute, 14 days at 30 minutes), its sites beyond
--max-target-sites are counted into one 'other' site per kind, and when
the history of all targets passes --max-history the oldest is thinned.

--listen serves, read-only:

  /metrics                 Prometheus text format: per target (labels pid,
                           comm, runtime, cgroup) outstanding bytes and count
                           and growth per kind, loss counters, the --top
                           culprits; the agent's own health
  /debug/pprof/leaks       every target's leaks as one pprof profile (samples
                           labelled pid and comm); ?pid=N for one
  /report?pid=N            one target's HTML report

The address must be loopback unless --listen-allow-remote. See docs/agent.md.`,
		Example: `  leakscope agent --select comm=java --select 'exe=/srv/*/bin/server' --listen 127.0.0.1:9464
  leakscope agent --select 'cgroup=*kubepods*' --listen 0.0.0.0:9464 --listen-allow-remote --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAgent(cmd.Context(), opts, io)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&opts.Selects, "select", nil, "trace the processes this expression matches: comm=NAME, exe=GLOB, runtime=jvm|go|native, cgroup=GLOB, pid=N, joined by ',' (all must match; repeatable: any may)")
	fs.StringVar(&opts.Listen, "listen", "127.0.0.1:9464", "serve /metrics, /debug/pprof/leaks and /report at HOST:PORT (HOST defaults to 127.0.0.1); '' serves nothing")
	fs.BoolVar(&opts.ListenAllowRemote, "listen-allow-remote", false, "let --listen be an address other than loopback: whoever can reach it can read every target's stacks")
	fs.DurationVar(&opts.Scan, "scan", agentScan, "how often /proc is read for processes the kernel's process events did not announce")
	fs.DurationVar(&opts.KeepExited, "keep-exited", agentKeepExited, "serve an exited target's last numbers for this long after its exit; 0 forgets it at once")
	fs.IntVar(&opts.MaxTargets, "max-targets", agentMaxTargets, "trace at most this many processes at once (each holds its own kernel tables); the others are counted")
	fs.IntVar(&opts.MaxTargetSites, "max-target-sites", agentMaxTargetSites, "distinct sites kept per target; later ones are counted into one 'other' site per kind")
	fs.StringVar(&opts.maxHistory, "max-history", agentMaxHistory, "snapshot history kept over all targets (40 bytes a site point); past it, the oldest is thinned")
	fs.IntVar(&opts.Top, "top", 10, "culprits per target in /metrics")
	fs.StringVar(&opts.LogFormat, "log-format", "text", "log lines on stderr: text or json")
	opts.addProbeFlags(fs, agentInterval, agentSampleBytes)
	opts.addCulpritFlags(fs)
	for name, v := range map[string]string{
		"max-allocations": strconv.FormatUint(agentMaxAllocations, 10),
		"max-sites":       strconv.FormatUint(agentMaxSites, 10),
		"max-stacks":      strconv.FormatUint(agentMaxStacks, 10),
		// Mappings and threads are always-on cheap: syscall exits only.
		"maps": "true",
	} {
		f := fs.Lookup(name)
		f.DefValue = v
		_ = f.Value.Set(v)
	}
	return cmd
}

func (o *agentOptions) validate() error {
	if len(o.Selects) == 0 {
		return fmt.Errorf("--select is required: which processes to trace, e.g. --select comm=java")
	}
	o.selectors = o.selectors[:0]
	for _, s := range o.Selects {
		sel, err := parseSelector(s)
		if err != nil {
			return err
		}
		o.selectors = append(o.selectors, sel)
	}
	o.Format, o.Progress, o.GroupBy = "text", "never", "stack"
	if err := o.captureOptions.validate(); err != nil {
		return err
	}
	if o.Listen != "" {
		if _, err := listenAddr("--listen", o.Listen, o.ListenAllowRemote); err != nil {
			return err
		}
	}
	if o.Scan < 100*time.Millisecond {
		return fmt.Errorf("--scan must be at least 100ms, got %s", o.Scan)
	}
	if o.KeepExited < 0 {
		return fmt.Errorf("--keep-exited must not be negative, got %s", o.KeepExited)
	}
	if o.MaxTargets < 1 || o.MaxTargetSites < 1 {
		return fmt.Errorf("--max-targets and --max-target-sites must be at least 1")
	}
	n, err := analyze.ParseSize(o.maxHistory)
	if err != nil || n == 0 || n > 1<<40 {
		return fmt.Errorf("--max-history %q: want a positive size such as 32MiB", o.maxHistory)
	}
	o.MaxHistory = int64(n)
	switch o.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("unknown --log-format %q: use text or json", o.LogFormat)
	}
	return nil
}

// logger writes the agent's log lines to w, as text or JSON lines; slog
// quotes values, so a process's name cannot forge a line.
func (o *agentOptions) logger(w io.Writer) *slog.Logger {
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// selector is one --select expression: every term must match.
type selector []selTerm

type selTerm struct {
	key string         // comm, exe, runtime, cgroup, pid
	raw string         // the value as given
	re  *regexp.Regexp // comm, exe, cgroup
	pid int
}

// procInfo is what a selector is matched against, read from /proc
// (hostile: the process chose its name) when a term asks for it.
type procInfo struct {
	Pid     int
	comm    func() string
	exe     func() string
	cgroup  func() string
	runtime func() string
}

var selKeys = []string{"comm", "exe", "runtime", "cgroup", "pid"}

func parseSelector(expr string) (selector, error) {
	var sel selector
	for _, term := range strings.Split(expr, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(term), "=")
		if !ok || val == "" {
			return nil, fmt.Errorf("--select %q: term %q is not KEY=VALUE (keys: %s)", expr, term, strings.Join(selKeys, ", "))
		}
		t := selTerm{key: key, raw: val}
		switch key {
		case "comm", "exe", "cgroup":
			t.re = globRegexp(val)
		case "runtime":
			switch val {
			case "jvm", "go", "native":
			default:
				return nil, fmt.Errorf("--select %q: runtime=%s: use jvm, go or native", expr, val)
			}
		case "pid":
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--select %q: pid=%s is not a process id", expr, val)
			}
			t.pid = n
		default:
			return nil, fmt.Errorf("--select %q: unknown key %q (keys: %s)", expr, key, strings.Join(selKeys, ", "))
		}
		sel = append(sel, t)
	}
	return sel, nil
}

// globRegexp is GLOB as a regular expression: * any text, / included,
// ? one character, everything else itself.
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^`)
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// match reports whether p meets every term; terms read p's fields
// cheapest first as written, and stop at the first that fails.
func (s selector) match(p *procInfo) bool {
	for _, t := range s {
		var ok bool
		switch t.key {
		case "pid":
			ok = p.Pid == t.pid
		case "comm":
			ok = t.re.MatchString(p.comm())
		case "exe":
			exe := p.exe()
			if !strings.Contains(t.raw, "/") {
				exe = path.Base(exe)
			}
			ok = exe != "" && t.re.MatchString(exe)
		case "cgroup":
			ok = t.re.MatchString(p.cgroup())
		case "runtime":
			ok = p.runtime() == t.raw
		}
		if !ok {
			return false
		}
	}
	return true
}

// anyMatch reports whether one of sels matches p.
func anyMatch(sels []selector, p *procInfo) bool {
	for _, s := range sels {
		if s.match(p) {
			return true
		}
	}
	return false
}
