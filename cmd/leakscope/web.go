package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/report"
)

// webOptions are the flags of report --http.
type webOptions struct {
	HTTP            string // HOST:PORT, :PORT or PORT; "" writes a report instead
	HTTPAllowRemote bool
}

func (o *webOptions) addWebFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HTTP, "http", "", "serve the capture in pprof's web UI at HOST:PORT until Ctrl-C, instead of writing a report (HOST defaults to 127.0.0.1)")
	fs.BoolVar(&o.HTTPAllowRemote, "http-allow-remote", false, "let --http listen on an address other than loopback: anyone who can reach it can read the capture")
}

// runWeb serves the capture in pprof's own web UI (the flame graph, top,
// graph, peek and source views) at --http until ctx ends, then shuts the
// server down and returns nil.
//
// pprof sees the capture as report.Pprof writes it, through a Fetcher, so
// it never reads a profile file or URL itself. It never symbolizes either,
// and reads no object file (webObjTool): the capture is symbolized already,
// and its paths name files of the traced machine, which a web request must
// not make leakscope read, or run objdump on, here. The routes that write
// pprof's settings file are left out.
//
// Without --http-allow-remote the listener must be a loopback address, and
// every request must come from loopback with a loopback Host header, which
// also stops DNS rebinding. With it, the source view, which reads the
// source files the capture names from the current directory, is left out
// too.
func runWeb(ctx context.Context, opts *reportOptions, io ioStreams) error {
	if opts.Output != "" || opts.ReportDir != "" || len(opts.FailOn) > 0 {
		return errors.New("--http serves the capture until Ctrl-C; it does not combine with -o, --report-dir or --fail-on")
	}
	addr, err := listenAddr("--http", opts.HTTP, opts.HTTPAllowRemote)
	if err != nil {
		return err
	}
	c, err := readCaptureFile(ctx, opts.File, opts.inputOptions)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := report.Pprof(&buf, analyze.Rank(c, opts.rankOptions(0))); err != nil {
		return err
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return fmt.Errorf("read back the pprof profile of %s: %w", opts.File, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	defer ln.Close()
	if tcp, ok := ln.Addr().(*net.TCPAddr); !opts.HTTPAllowRemote && (!ok || !tcp.IP.IsLoopback()) {
		return fmt.Errorf("--http %s listens on %s, which is not loopback; add --http-allow-remote to serve it anyway", opts.HTTP, ln.Addr())
	}
	ui := &webUI{w: io.Err}
	err = driver.PProf(&driver.Options{
		Flagset: newWebFlags("-http="+ln.Addr().String(), "-no_browser", opts.File),
		Fetch:   webFetcher{p},
		Sym:     webSymbolizer{},
		Obj:     newWebObjTool(p),
		UI:      ui,
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			ui.Print(fmt.Sprintf("serving %s at http://%s/ui/ until Ctrl-C", opts.File, ln.Addr()))
			return serveWeb(ctx, ln, args.Handlers, opts.HTTPAllowRemote)
		},
	})
	if err != nil {
		return fmt.Errorf("pprof web UI: %w", err)
	}
	return nil
}

// listenAddr turns flag's value addr (--http, agent's --listen) into an
// address to listen on: a missing host is 127.0.0.1, and a host that is
// not loopback needs allowRemote (--http-allow-remote,
// --listen-allow-remote).
func listenAddr(flag, addr string, allowRemote bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, perr := strconv.ParseUint(addr, 10, 16); perr != nil {
			return "", fmt.Errorf("%s %q: want HOST:PORT, :PORT or PORT, e.g. 127.0.0.1:8080", flag, addr)
		}
		host, port = "", addr
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !isLoopback(host) {
		return "", fmt.Errorf("%s %s is not a loopback address, and whoever can reach it can read the capture; add %s-allow-remote to serve it anyway", flag, addr, flag)
	}
	return net.JoinHostPort(host, port), nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackRequest reports whether req comes from loopback and names a
// loopback host.
func loopbackRequest(req *http.Request) bool {
	remote, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil || !isLoopback(remote) {
		return false
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopback(strings.Trim(host, "[]"))
}

// webWrites matches the pprof routes that write its settings file.
var webWrites = regexp.MustCompile(`^/(save|delete)config$`)

// serveWeb serves pprof's handlers on ln (see webMux) until ctx ends.
func serveWeb(ctx context.Context, ln net.Listener, handlers map[string]http.Handler, allowRemote bool) error {
	srv := &http.Server{Handler: webMux(handlers, allowRemote), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// webMux serves pprof's handlers under /ui/ and redirects / there, as
// pprof's own server does, except the routes runWeb leaves out. Without
// allowRemote it answers only loopback requests (loopbackRequest).
func webMux(handlers map[string]http.Handler, allowRemote bool) *http.ServeMux {
	ui := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowRemote && !loopbackRequest(req) {
			http.Error(w, "leakscope serves this capture to loopback clients only", http.StatusForbidden)
			return
		}
		h := handlers[req.URL.Path]
		if h == nil || webWrites.MatchString(req.URL.Path) || allowRemote && req.URL.Path == "/source" {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	mux.Handle("/{$}", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	return mux
}

// webFetcher hands pprof the capture's profile, whatever the source name.
// It returns no source URL, so pprof neither treats the profile as remote
// nor saves a copy of it under ~/pprof.
type webFetcher struct{ p *profile.Profile }

func (f webFetcher) Fetch(string, time.Duration, time.Duration) (*profile.Profile, string, error) {
	return f.p, "", nil
}

// webSymbolizer leaves the profile as it is: leakscope symbolized it while
// the target was alive.
type webSymbolizer struct{}

func (webSymbolizer) Symbolize(string, driver.MappingSources, *profile.Profile) error { return nil }

// webObjTool opens no object files; see runWeb. For the profile's own
// mappings it returns an object without symbols, so pprof's disassembly
// view finds nothing (pprof prints a failed Open to standard output); for
// any other path it fails, so pprof keeps the mappings' file names rather
// than adopting a local file it found for them.
type webObjTool struct{ files map[string]bool }

var errNoObjects = errors.New("leakscope serves a symbolized capture and opens no object files")

func newWebObjTool(p *profile.Profile) webObjTool {
	t := webObjTool{files: map[string]bool{}}
	for _, m := range p.Mapping {
		t.files[m.File] = true
	}
	return t
}

func (t webObjTool) Open(file string, _, _, _ uint64, _ string) (driver.ObjFile, error) {
	if !t.files[file] {
		return nil, errNoObjects
	}
	return emptyObjFile(file), nil
}

func (webObjTool) Disasm(string, uint64, uint64, bool) ([]driver.Inst, error) {
	return nil, errNoObjects
}

// emptyObjFile is an object file with no symbols and no line tables.
type emptyObjFile string

func (f emptyObjFile) Name() string                                        { return string(f) }
func (emptyObjFile) ObjAddr(addr uint64) (uint64, error)                   { return addr, nil }
func (emptyObjFile) BuildID() string                                       { return "" }
func (emptyObjFile) SourceLine(uint64) ([]driver.Frame, error)             { return nil, nil }
func (emptyObjFile) Symbols(*regexp.Regexp, uint64) ([]*driver.Sym, error) { return nil, nil }
func (emptyObjFile) Close() error                                          { return nil }

// webUI is pprof's user interface: its messages go to stderr, it reads no
// commands and opens no browser. HTTP handlers print from their own
// goroutines, hence the lock.
type webUI struct {
	mu sync.Mutex
	w  io.Writer
}

func (u *webUI) ReadLine(string) (string, error) { return "", io.EOF }

func (u *webUI) Print(args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	printLine(u.w, "leakscope: %s", strings.TrimSuffix(fmt.Sprint(args...), "\n"))
}

func (u *webUI) PrintErr(args ...any) { u.Print(args...) }

func (u *webUI) IsTerminal() bool { return false }

func (u *webUI) WantBrowser() bool { return false }

func (u *webUI) SetAutoComplete(func(string) string) {}

// webFlags is pprof's command line, fixed by runWeb rather than read from
// os.Args.
type webFlags struct {
	fs    *flag.FlagSet
	args  []string
	usage []string
}

func newWebFlags(args ...string) *webFlags {
	fs := flag.NewFlagSet("pprof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &webFlags{fs: fs, args: args}
}

func (f *webFlags) Bool(name string, def bool, usage string) *bool {
	return f.fs.Bool(name, def, usage)
}

func (f *webFlags) Int(name string, def int, usage string) *int {
	return f.fs.Int(name, def, usage)
}

func (f *webFlags) Float64(name string, def float64, usage string) *float64 {
	return f.fs.Float64(name, def, usage)
}

func (f *webFlags) String(name, def, usage string) *string {
	return f.fs.String(name, def, usage)
}

func (f *webFlags) StringList(name, def, usage string) *[]*string {
	return &[]*string{f.fs.String(name, def, usage)}
}

func (f *webFlags) ExtraUsage() string { return strings.Join(f.usage, "\n") }

func (f *webFlags) AddExtraUsage(eu string) { f.usage = append(f.usage, eu) }

func (f *webFlags) Parse(usage func()) []string {
	if err := f.fs.Parse(f.args); err != nil || f.fs.NArg() == 0 {
		usage()
		return nil
	}
	return f.fs.Args()
}
