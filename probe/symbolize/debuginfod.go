package symbolize

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/leakscope/leakscope/internal/safefile"
)

// Limits of a Debuginfod whose fields are left zero.
const (
	// DefaultDebuginfodTimeout bounds one request, from connecting to the
	// last byte of the body.
	DefaultDebuginfodTimeout = 10 * time.Second
	// DefaultDebuginfodBudget bounds the requests of one Debuginfod: none
	// is made, or runs, later than this after the first one started.
	DefaultDebuginfodBudget = 60 * time.Second
	// DefaultDebuginfodMaxBytes caps one downloaded debug file: it is
	// held in memory until it is checked (libstdc++'s is ~20 MB, libc's
	// 5 MB).
	DefaultDebuginfodMaxBytes = 512 << 20
)

// maxBuildIDHex bounds the build IDs asked for: 64 bytes, far above the
// 20 of a SHA-1 build ID, and a short path component.
const maxBuildIDHex = 128

// ErrNoDebuginfod is the error of an object whose debug file was wanted
// while no debuginfod server was configured.
var ErrNoDebuginfod = errors.New("debuginfod is not configured (set DEBUGINFOD_URLS or pass --debuginfod URLS)")

// Debuginfod fetches separate debug files by build ID from debuginfod
// servers (GET URL/buildid/HEX/debuginfo, as elfutils' client does) into a
// local cache. Servers are asked in order until one has the file. Nothing
// a server sends is trusted: a response over MaxBytes is refused, a
// redirect is not followed, no proxy is used, and a file is kept only if it
// is ELF with the build ID asked for and symbols or DWARF of its own. A
// Debuginfod is safe for concurrent use.
type Debuginfod struct {
	// URLs are the servers' base URLs (http or https).
	URLs []string
	// CacheDir holds fetched files as CacheDir/HEX/debuginfo. It is
	// created (mode 0700) with internal/safefile, so a directory or a
	// link another user planted on the way is refused.
	CacheDir string
	// Timeout bounds one request, MaxBytes one file, Budget all requests
	// together; zero takes the defaults above.
	Timeout  time.Duration
	Budget   time.Duration
	MaxBytes int64

	once     sync.Once
	client   *http.Client
	mu       sync.Mutex
	deadline time.Time // set by the first request: the budget's end
}

// ParseDebuginfodURLs splits s, as DEBUGINFOD_URLS holds it (URLs separated
// by spaces), and checks each is an absolute http or https URL.
func ParseDebuginfodURLs(s string) ([]string, error) {
	var urls []string
	for _, f := range strings.Fields(s) {
		u, err := url.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("debuginfod URL %q: %w", f, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("debuginfod URL %q: want http://HOST or https://HOST", f)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("debuginfod URL %q: a server's URL has no query or fragment", f)
		}
		urls = append(urls, strings.TrimRight(f, "/"))
	}
	return urls, nil
}

// DefaultDebuginfodCache is the cache directory: leakscope/debuginfod in
// $XDG_CACHE_HOME, or in ~/.cache when it is not set.
func DefaultDebuginfodCache() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the debuginfod cache: %w", err)
	}
	return filepath.Join(dir, "leakscope", "debuginfod"), nil
}

func (d *Debuginfod) init() {
	d.once.Do(func() {
		d.client = &http.Client{
			Transport: &http.Transport{
				Proxy:               nil, // only the servers given are contacted
				DisableCompression:  true,
				MaxIdleConnsPerHost: 1,
			},
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				return fmt.Errorf("redirected to %s: redirects are not followed", req.URL.Redacted())
			},
		}
	})
}

func (d *Debuginfod) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return DefaultDebuginfodTimeout
}

func (d *Debuginfod) maxBytes() int64 {
	if d.MaxBytes > 0 {
		return d.MaxBytes
	}
	return DefaultDebuginfodMaxBytes
}

// budgetEnd returns the end of the budget, starting it on first use.
func (d *Debuginfod) budgetEnd() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deadline.IsZero() {
		b := d.Budget
		if b <= 0 {
			b = DefaultDebuginfodBudget
		}
		d.deadline = time.Now().Add(b)
	}
	return d.deadline
}

// Fetch returns the path of the debug file of build ID id (lowercase hex)
// in the cache, downloading it first when it is not there.
func (d *Debuginfod) Fetch(ctx context.Context, id string) (string, error) {
	if !validBuildID(id) {
		return "", fmt.Errorf("build id %q: not one debuginfod can be asked for", id)
	}
	if len(d.URLs) == 0 {
		return "", ErrNoDebuginfod
	}
	if d.CacheDir == "" {
		return "", errors.New("debuginfod: no cache directory")
	}
	path := filepath.Join(d.CacheDir, id, "debuginfo")
	if ok, err := cachedDebugFile(path, id); err != nil {
		return "", err
	} else if ok {
		return path, nil
	}
	d.init()
	var errs []string
	for _, base := range d.URLs {
		data, err := d.get(ctx, base+"/buildid/"+id+"/debuginfo")
		if err == nil {
			err = checkDebugData(data, id)
		}
		if err != nil {
			errs = append(errs, err.Error())
			if ctx.Err() != nil || errors.Is(err, errBudget) {
				break
			}
			continue
		}
		dir, err := safefile.MkdirAll(filepath.Dir(path), safefile.Options{})
		if err != nil {
			return "", fmt.Errorf("debuginfod cache: %w", err)
		}
		defer dir.Close()
		if err := dir.WriteFile("debuginfo", data, safefile.Options{}); err != nil {
			return "", fmt.Errorf("debuginfod cache: %w", err)
		}
		return path, nil
	}
	return "", fmt.Errorf("debuginfod: %s", strings.Join(errs, "; "))
}

// errBudget ends the requests once the budget is spent.
var errBudget = errors.New("the time budget for debuginfod is spent")

// get downloads url whole, within the request timeout, the budget and
// MaxBytes.
func (d *Debuginfod) get(ctx context.Context, url string) ([]byte, error) {
	end := d.budgetEnd()
	left := time.Until(end)
	if left <= 0 {
		return nil, fmt.Errorf("GET %s: %w (%s)", url, errBudget, d.budgetString())
	}
	limit := min(d.timeout(), left)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	late := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("GET %s: no answer within %s", url, limit.Round(time.Millisecond))
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "leakscope")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, late(err) // *url.Error: "Get "URL": ..."
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	max := d.maxBytes()
	if resp.ContentLength > max {
		return nil, fmt.Errorf("GET %s: %d bytes, over the limit of %d", url, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, late(fmt.Errorf("GET %s: read body: %w", url, err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("GET %s: over the limit of %d bytes", url, max)
	}
	return data, nil
}

func (d *Debuginfod) budgetString() string {
	b := d.Budget
	if b <= 0 {
		b = DefaultDebuginfodBudget
	}
	return b.String()
}

// validBuildID reports whether id is lowercase hex of whole bytes, short
// enough to name a directory.
func validBuildID(id string) bool {
	if len(id) < 2 || len(id) > maxBuildIDHex || len(id)%2 != 0 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkDebugData accepts data as the debug file of build ID id: ELF, of
// that build ID, with symbols or DWARF.
func checkDebugData(data []byte, id string) error {
	return safely("debug file", func() error {
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("not an ELF file: %w", err)
		}
		got, err := buildID(f)
		if err != nil {
			return err
		}
		if got != id {
			return fmt.Errorf("build id %q, want %s", got, id)
		}
		if s := f.Section(".symtab"); (s == nil || s.Type == elf.SHT_NOBITS) && !hasDWARF(f) {
			return errors.New("no symbols and no DWARF")
		}
		return nil
	})
}

// cachedDebugFile reports whether the cache holds a file at path; a file
// there that is not the debug file of id is an error.
func cachedDebugFile(path, id string) (bool, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	d := openDebugFile(path, "", func(d *debugFile) bool { return matchBuildID(d, id) })
	if d == nil {
		return false, fmt.Errorf("debuginfod cache: %s is not the debug file of build id %s: remove it", path, id)
	}
	d.close()
	return true, nil
}
