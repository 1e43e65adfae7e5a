package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The command examples of the docs are checked against the command tree,
// so a renamed or removed command or flag, or a value a flag no longer
// accepts, fails here instead of misleading a reader.
//
// How examples are found (docExamples): in README.md, docs/*.md and
// examples/README.md, every
// fenced block whose info string is sh, bash, shell, console or yaml; in
// it, every line (joined with the next while it ends in a backslash) that
// is a leakscope command once a prompt ("$ ", and "# " in console blocks,
// where it is root's prompt rather than a comment), a YAML "- " or
// "run: ", and "sudo " are taken off its front. The line is split into
// words as sh would (quotes, backslashes), up to the first unquoted
// comment, pipe, list or redirection (#, |, &, ;, <, >); a word with a
// shell expansion ($VAR, $!, $(...)) stands for a value the page cannot
// know, mostly a pid, and becomes "1".
//
// How each is checked (parseExample): the words after "leakscope" run
// through the real command tree, whose run, attach, agent, report, diff
// and doctor are built with a runF that returns at once, after the flags
// are parsed and validated as for a real run: the command, every flag
// and its value must be accepted. Nothing is traced, no file is read or
// written, no process is looked up.
func TestDocExamples(t *testing.T) {
	pages := docPages(t, "../../README.md", "../../examples/README.md", "../../docs/*.md")
	total := 0
	for _, page := range pages {
		for _, ex := range docExamples(page.text) {
			total++
			name := fmt.Sprintf("%s:%d", page.name, ex.line)
			if err := parseExample(ex.args); err != nil {
				t.Errorf("%s: leakscope %s\n\t%v", name, strings.Join(ex.args, " "), err)
			}
		}
	}
	// The README alone has eight; a broken extractor finds none.
	if total < 10 {
		t.Errorf("found %d examples in %d files; the extraction is broken", total, len(pages))
	}
	t.Logf("%d examples in %d files", total, len(pages))
}

// The extractor and the check on a made-up page: what is a command, what
// is not, and that a flag the tree does not have fails.
func TestDocExamplesExtraction(t *testing.T) {
	page := "text `leakscope run --not-checked`\n" +
		"```sh\n" +
		"make demo\n" +
		"leakscope attach --pid 4242 --duration 5m   # five minutes\n" +
		"sudo leakscope run \\\n    --fail-on 'kind=zlib.*,count>0' \\\n    -- ./repro --iterations 10\n" +
		"leakscope report --format pprof -o leaks.pb.gz leaks.capture && go tool pprof -top leaks.pb.gz\n" +
		"# leakscope run --commented-out\n" +
		"leakscope report --report-dir \"$ARTIFACTS\" x.capture >out.txt\n" +
		"leakscope attach --pid $(pgrep -n server) --top $((2 * 5))\n" +
		"```\n" +
		"```console\n" +
		"# leakscope doctor --pid 1\n" +
		"leakscope: traced pid 1028 (output, not a command)\n" +
		"```\n" +
		"```yaml\n" +
		"    - leakscope run --fail-on 'bytes>1MiB' -- ./repro\n" +
		"        run: sudo leakscope doctor\n" +
		"```\n" +
		"```json\n{\"x\": \"leakscope run --nope\"}\n```\n" +
		"```sh\nleakscope attach --pid 1 --formatt json\n```\n"
	var got []string
	for _, ex := range docExamples(page) {
		got = append(got, fmt.Sprintf("%d:%s", ex.line, strings.Join(ex.args, "|")))
	}
	want := []string{
		"4:attach|--pid|4242|--duration|5m",
		"5:run|--fail-on|kind=zlib.*,count>0|--|./repro|--iterations|10",
		"8:report|--format|pprof|-o|leaks.pb.gz|leaks.capture",
		"10:report|--report-dir|1|x.capture",
		"11:attach|--pid|1|--top|1",
		"14:doctor|--pid|1",
		"18:run|--fail-on|bytes>1MiB|--|./repro",
		"19:doctor",
		"25:attach|--pid|1|--formatt|json",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("extracted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, ex := range docExamples(page)[:6] {
		if err := parseExample(ex.args); err != nil {
			t.Errorf("line %d: %v", ex.line, err)
		}
	}
	for _, args := range [][]string{
		{"attach", "--pid", "1", "--formatt", "json"},
		{"run", "--format", "xml", "--", "true"},
		{"attach", "--duration", "five", "--pid", "1"},
		{"frobnicate"},
		{"diff", "one.capture"},
	} {
		if err := parseExample(args); err == nil {
			t.Errorf("leakscope %s: accepted", strings.Join(args, " "))
		}
	}
}

type docExample struct {
	line int // 1-based, of the command's first line
	args []string
}

// docExamples returns the leakscope commands of a Markdown page's fenced
// blocks (see TestDocExamples).
func docExamples(md string) []docExample {
	var out []docExample
	lang, inBlock := "", false
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if fence := strings.TrimSpace(l); strings.HasPrefix(fence, "```") {
			if inBlock {
				inBlock = false
			} else {
				inBlock, lang = true, strings.TrimSpace(strings.TrimPrefix(fence, "```"))
			}
			continue
		}
		if !inBlock {
			continue
		}
		switch lang {
		case "sh", "bash", "shell", "console", "yaml":
		default:
			continue
		}
		start := i
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + lines[i]
		}
		cmd := strings.TrimSpace(l)
		for _, p := range []string{"$ ", "- ", "run: "} {
			cmd = strings.TrimPrefix(cmd, p)
		}
		if lang == "console" {
			cmd = strings.TrimPrefix(cmd, "# ")
		}
		cmd = strings.TrimPrefix(strings.TrimSpace(cmd), "sudo ")
		if !strings.HasPrefix(cmd, "leakscope ") && cmd != "leakscope" {
			continue
		}
		words := shellWords(cmd)
		out = append(out, docExample{line: start + 1, args: words[1:]})
	}
	return out
}

// shellWords splits s as sh would, up to the first unquoted comment,
// pipe, list or redirection; a word with an expansion becomes "1".
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, expands := false, false
	end := func() {
		if inWord {
			if expands {
				words = append(words, "1")
			} else {
				words = append(words, w.String())
			}
		}
		w.Reset()
		inWord, expands = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				} else if s[i] == '$' {
					expands = true
				}
				w.WriteByte(s[i])
			}
		case c == '\\' && i+1 < len(s):
			inWord = true
			i++
			w.WriteByte(s[i])
		case strings.IndexByte("|&;<>", c) >= 0, c == '#' && !inWord:
			end()
			return words
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			// $(...) and $((...)): one expansion, up to its closing parenthesis.
			inWord, expands = true, true
			depth := 0
			for ; i < len(s); i++ {
				if s[i] == '(' {
					depth++
				} else if s[i] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
		default:
			if c == '$' {
				expands = true
			}
			inWord = true
			w.WriteByte(c)
		}
	}
	end()
	return words
}

// parseExample runs args through leakscope's command tree with every
// command's work replaced by nothing (see TestDocExamples).
func parseExample(args []string) error {
	var sink strings.Builder
	io := ioStreams{In: strings.NewReader(""), Out: &sink, Err: &sink}
	root := newRootCmd(io)
	var budget memoryBudget
	budget.register(root)
	defer budget.stop()
	addFlagSuggestions(root)
	dry := map[string]*cobra.Command{
		"run":    newRunCmd(io, func(context.Context, *runOptions) error { return nil }),
		"attach": newAttachCmd(io, func(context.Context, *attachOptions) error { return nil }),
		"report": newReportCmd(io, func(context.Context, *reportOptions) error { return nil }),
		"diff":   newDiffCmd(io, func(context.Context, *diffOptions) error { return nil }),
		"doctor": newDoctorCmd(io, func(context.Context, *doctorOptions) error { return nil }),
		"agent":  newAgentCmd(io, func(context.Context, *agentOptions) error { return nil }),
	}
	for _, c := range root.Commands() {
		if d, ok := dry[c.Name()]; ok {
			root.RemoveCommand(c)
			root.AddCommand(d)
		} else if c.Runnable() {
			c.Run, c.RunE = nil, func(*cobra.Command, []string) error { return nil }
		}
	}
	root.SetArgs(args)
	return suggestCommand(root.ExecuteContext(context.Background()))
}

// TestDocLinks checks every relative link of the docs (README.md,
// docs/*.md, examples/README.md, bench/*.md): the file it names exists, and
// a #fragment names a heading of the page it points to, as GitHub makes
// heading anchors. A renamed page, results file or section then fails here.
func TestDocLinks(t *testing.T) {
	pages := docPages(t, "../../README.md", "../../docs/*.md", "../../examples/README.md", "../../bench/*.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := headingAnchors(string(data))
		anchors[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		file := page.path
		for _, l := range docLinks(page.text) {
			links++
			name := fmt.Sprintf("%s:%d: %s", page.name, l.line, l.target)
			path, frag, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s: no heading #%s in %s", name, frag, strings.TrimPrefix(target, "../../"))
			}
		}
	}
	if links < 20 {
		t.Errorf("found %d links in %d files; the extraction is broken", links, len(pages))
	}
}

// docPage is a Markdown file of the repository: its path from this
// package, its name from the repository's root, and its text.
type docPage struct{ path, name, text string }

// docPages reads the files the glob patterns match.
func docPages(t *testing.T, patterns ...string) []docPage {
	t.Helper()
	var pages []docPage
	for _, pattern := range patterns {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, docPage{path: file, name: strings.TrimPrefix(file, "../../"), text: string(data)})
		}
	}
	return pages
}

type docLink struct {
	line   int
	target string
}

var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// docLinks returns the relative link targets of md outside fenced code.
func docLinks(md string) []docLink {
	var links []docLink
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, docLink{line: i + 1, target: target})
		}
	}
	return links
}

// headingAnchors returns the anchors GitHub gives md's headings: lower
// case, punctuation but '-' and '_' dropped, spaces as '-', and -1, -2, ...
// after a repeated one.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}
