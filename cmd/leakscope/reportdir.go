package main

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/safefile"
	"github.com/leakscope/leakscope/report"
)

// writeReportDir writes the CI artifacts of --report-dir, when it is set:
// report.txt, report.json, report.html, profile.pb.gz and junit.xml. Every
// file is rendered before the first is written, so a rendering error leaves
// the directory as it was; each file is then written whole or not at all
// (safefile), mode 0600, into the directory, which is created with mode
// 0700 when missing; a directory or entry of another user is refused
// unless --force. The reports follow --format's renderers with
// --min-age, --top and the filters (--focus, --ignore, --kind, --group-by);
// profile.pb.gz holds every site they keep, and junit.xml applies the
// --fail-on rules to every leak, as finish does.
func writeReportDir(c *analyze.Capture, opts *captureOptions) error {
	if opts.ReportDir == "" {
		return nil
	}
	res := analyze.Rank(c, opts.rankOptions(opts.Top))
	correlateGoroutines(res, opts) // as writeReport does, so the files agree with it
	var data [5][]byte             // rendered files; junit.xml embeds report.txt
	files := [len(data)]struct {
		name   string
		render func(io.Writer) error
	}{
		{"report.txt", func(w io.Writer) error { return report.Text(w, res, report.TextOptions{Top: opts.Top}) }},
		{"report.json", func(w io.Writer) error { return report.JSON(w, res) }},
		{"report.html", func(w io.Writer) error { return report.HTML(w, res) }},
		{"profile.pb.gz", func(w io.Writer) error { return report.Pprof(w, res) }},
		{"junit.xml", func(w io.Writer) error {
			all := analyze.Rank(c, opts.rankOptions(0))
			return writeJUnit(w, c, opts.rules, analyze.MatchRules(all, opts.rules), data[0])
		}},
	}
	for i, f := range files {
		var b bytes.Buffer
		if err := f.render(&b); err != nil {
			return fmt.Errorf("--report-dir: render %s: %w", f.name, err)
		}
		data[i] = b.Bytes()
	}
	dir, err := safefile.MkdirAll(opts.ReportDir, opts.outputOptions())
	if err != nil {
		return fmt.Errorf("--report-dir: %w", err)
	}
	defer dir.Close()
	for i, f := range files {
		if err := dir.WriteFile(f.name, data[i], opts.outputOptions()); err != nil {
			return fmt.Errorf("--report-dir: %w", err)
		}
	}
	return nil
}

// reportDirFiles are the files writeReportDir writes.
var reportDirFiles = []string{"report.txt", "report.json", "report.html", "profile.pb.gz", "junit.xml"}

// checkReportDir creates --report-dir (mode 0700) and fails early, before
// a long capture, when files cannot be created in it.
func checkReportDir(path string, opts safefile.Options) error {
	if path == "" {
		return nil
	}
	dir, err := safefile.MkdirAll(path, opts)
	if err != nil {
		return fmt.Errorf("--report-dir: %w", err)
	}
	defer dir.Close()
	for _, name := range reportDirFiles {
		if err := dir.Check(name, opts); err != nil {
			return fmt.Errorf("--report-dir: %w", err)
		}
	}
	return nil
}

// JUnit XML, as Jenkins, GitLab and the GitHub test-report actions read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes one test case per rule, named "fail-on RULE", failed
// when a leak matched it, listing the matching rows with their stacks. With
// no rules it writes one passing test case, "leakscope". The suite's
// standard output is text, the text report, so a CI test view shows the
// leaks.
func writeJUnit(w io.Writer, c *analyze.Capture, rules []analyze.Rule, matches []analyze.RuleMatch, text []byte) error {
	suite := junitSuite{
		Name: "leakscope",
		Time: seconds(c.Duration.Seconds()),
		Properties: []junitProperty{
			{"pid", strconv.Itoa(c.Target.Pid)},
			{"command", strings.Join(c.Target.Command, " ")},
		},
	}
	if !c.StartedAt.IsZero() {
		suite.Timestamp = c.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	suite.SystemOut = string(text)
	if len(rules) == 0 {
		suite.Cases = []junitCase{{Name: "leakscope", Classname: "leakscope", Time: "0"}}
	}
	for _, r := range rules {
		tc := junitCase{Name: "fail-on " + r.String(), Classname: "leakscope", Time: "0"}
		var rows []string
		for _, m := range matches {
			if m.Rule.String() == r.String() {
				rows = append(rows, matchRow(m.Leak))
			}
		}
		if len(rows) > 0 {
			tc.Failure = &junitFailure{
				Message: fmt.Sprintf("%d leak rows match --fail-on %s", len(rows), r.String()),
				Type:    "leak",
				Text:    strings.Join(rows, "\n"),
			}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Tests = len(suite.Cases)
	all := junitSuites{
		Name: "leakscope", Tests: suite.Tests, Failures: suite.Failures, Time: suite.Time,
		Suites: []junitSuite{suite},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// matchRow describes one matching leak row: what it holds, then its stack,
// leaf first.
func matchRow(l *analyze.Leak) string {
	s := l.Site
	top := "?"
	if len(s.Stack.Frames) > 0 {
		top = frameLabel(*s.Stack.Frames[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d: %s, %d live, %s, in %s\n", l.Rank, s.Kind, l.Count, analyze.FormatBytes(l.Bytes), top)
	for i, f := range s.Stack.Frames {
		loc := fmt.Sprintf("0x%x", f.Address)
		if f.Module != "" {
			loc = fmt.Sprintf("%s+0x%x", f.Module, f.Offset)
		}
		fmt.Fprintf(&b, "  #%d %s (%s)", i, cmp.Or(f.Function, "?"), loc)
		if f.File != "" {
			fmt.Fprintf(&b, " %s:%d", f.File, f.Line)
		}
		b.WriteString("\n")
	}
	if s.Stack.Truncated != "" {
		fmt.Fprintf(&b, "  … stack truncated: %s\n", s.Stack.Truncated)
	}
	return b.String()
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
