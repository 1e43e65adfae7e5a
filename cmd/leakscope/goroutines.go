package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/analyze"
)

// goroutineFetchTimeout bounds fetching a --goroutines URL: a dump of a
// large server takes seconds to write, never minutes.
const goroutineFetchTimeout = 30 * time.Second

// goroutineDump is the --goroutines flag and, once read, its dump: it is
// read once however many reports are rendered.
type goroutineDump struct {
	src  string
	read bool
	gs   []analyze.Goroutine
	err  error
}

// addGoroutinesFlag registers --goroutines on everything that renders a
// report (run, attach, report).
func (o *captureOptions) addGoroutinesFlag(fs *pflag.FlagSet) {
	fs.StringVar(&o.Goroutines.src, "goroutines", "", "Go targets: list, per leak, the goroutines whose stacks run through its Go code, "+
		"from a goroutine dump fetched when the report is written: a URL of the target's net/http/pprof "+
		"(http://127.0.0.1:6060 means /debug/pprof/goroutine?debug=2) or a file holding such a dump")
}

// correlateGoroutines reads the --goroutines dump, if any, and attaches it
// to res's leaks. A dump that cannot be read does not cost the report: it
// becomes a warning in it.
func correlateGoroutines(res *analyze.Result, opts *captureOptions) {
	d := &opts.Goroutines
	if d.src == "" {
		return
	}
	if !d.read {
		d.gs, d.err = readGoroutines(d.src)
		d.read = true
	}
	if d.err != nil {
		w := "--goroutines: " + d.err.Error()
		if !slices.Contains(res.Capture.Warnings, w) {
			res.Capture.Warnings = append(res.Capture.Warnings, w)
		}
		return
	}
	analyze.CorrelateGoroutines(res, d.gs)
}

// maxGoroutineDump bounds a goroutine dump: 100k goroutines of 30
// frames are ~300 MB in debug=2 form.
const maxGoroutineDump = 512 << 20

// capped reads r up to maxGoroutineDump bytes, and fails past it.
func capped(r io.Reader) io.Reader {
	return io.MultiReader(io.LimitReader(r, maxGoroutineDump), &overLimit{r: r})
}

// overLimit fails if anything is left to read.
type overLimit struct{ r io.Reader }

func (o *overLimit) Read(p []byte) (int, error) {
	var b [1]byte
	if n, _ := o.r.Read(b[:]); n > 0 {
		return 0, fmt.Errorf("goroutine dump larger than %s", analyze.FormatBytes(maxGoroutineDump))
	}
	return 0, io.EOF
}

// readGoroutines reads a goroutine dump from a file or an http(s) URL.
func readGoroutines(src string) ([]analyze.Goroutine, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		f, _, err := openRegular(src, "a goroutine dump")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		gs, err := analyze.ParseGoroutines(capped(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		return gs, nil
	}
	u, err := goroutineURL(src)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: goroutineFetchTimeout}
	resp, err := client.Get(u)
	if err != nil {
		return nil, fmt.Errorf("fetch goroutine dump: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("fetch %s: %s", u, resp.Status)
	}
	gs, err := analyze.ParseGoroutines(capped(resp.Body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return gs, nil
}

// goroutineURL completes a pprof address: no path means the goroutine
// profile, and without a debug parameter it asks for debug=2, the text
// dump with every goroutine's full stack (the default is a protobuf
// profile, which has no goroutine states).
func goroutineURL(src string) (string, error) {
	u, err := url.Parse(src)
	if err != nil {
		return "", fmt.Errorf("--goroutines %q: %w", src, err)
	}
	if u.Host == "" {
		return "", fmt.Errorf("--goroutines %q: no host", src)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/debug/pprof/goroutine"
	}
	q := u.Query()
	if !q.Has("debug") {
		q.Set("debug", "2")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
