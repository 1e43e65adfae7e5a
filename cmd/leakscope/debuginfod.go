package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/leakscope/leakscope/probe/symbolize"
)

// debuginfodOption is --debuginfod URLS, shared by run, attach and
// doctor: the debuginfod servers that supply the debug files of stripped
// objects. Without the flag, DEBUGINFOD_URLS is used as elfutils' tools
// use it; --debuginfod ” turns fetching off. report has no such flag: it
// re-renders a capture whose frames were named when it was taken.
type debuginfodOption struct {
	urls string
	set  bool
}

func (d *debuginfodOption) String() string { return d.urls }
func (d *debuginfodOption) Type() string   { return "URLS" }
func (d *debuginfodOption) Set(s string) error {
	d.urls, d.set = s, true
	return nil
}

func (d *debuginfodOption) addFlag(fs *pflag.FlagSet) {
	fs.Var(d, "debuginfod", "fetch the debug files of stripped objects from these debuginfod servers (space-separated URLs; default: $DEBUGINFOD_URLS; '' fetches nothing)")
}

// source returns the configured servers with the cache they fill, nil
// when none is configured. Entries of DEBUGINFOD_URLS leakscope cannot use
// are dropped and returned as a notice; a bad --debuginfod is an error.
func (d *debuginfodOption) source() (src *symbolize.Debuginfod, notice string, err error) {
	var urls []string
	if d.set {
		if urls, err = symbolize.ParseDebuginfodURLs(d.urls); err != nil {
			return nil, "", fmt.Errorf("--debuginfod: %w", err)
		}
	} else {
		var bad []string
		for _, f := range strings.Fields(os.Getenv("DEBUGINFOD_URLS")) {
			u, err := symbolize.ParseDebuginfodURLs(f)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			urls = append(urls, u...)
		}
		if len(bad) > 0 {
			notice = "DEBUGINFOD_URLS: ignored " + strings.Join(bad, "; ")
		}
	}
	if len(urls) == 0 {
		return nil, notice, nil
	}
	dir, err := symbolize.DefaultDebuginfodCache()
	if err != nil {
		return nil, "", err
	}
	return &symbolize.Debuginfod{URLs: urls, CacheDir: dir}, notice, nil
}
