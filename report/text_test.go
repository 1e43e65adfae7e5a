package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
)

func TestFrame(t *testing.T) {
	tests := []struct {
		f           analyze.Frame
		full, short string
	}{
		{
			analyze.Frame{Address: 0x7f0010001234, Function: "inflateInit2_", Module: "/usr/lib/libz.so.1", Offset: 0x1234, File: "inflate.c", Line: 227},
			"inflateInit2_ (/usr/lib/libz.so.1+0x1234) inflate.c:227", "inflateInit2_",
		},
		{
			analyze.Frame{Address: 0x7f0010001234, Function: "f", Module: "/lib/m.so", Offset: 0x34, File: "m.c"},
			"f (/lib/m.so+0x34) m.c", "f",
		},
		{
			analyze.Frame{Address: 0x7f0010001234, Module: "/usr/lib/libz.so.1", Offset: 0x1234},
			"/usr/lib/libz.so.1+0x1234", "libz.so.1+0x1234",
		},
		{
			analyze.Frame{Address: 0x7ffd0badf00d},
			"0x7ffd0badf00d", "0x7ffd0badf00d",
		},
		{
			analyze.Frame{Address: 0xdead, Function: "jitted"},
			"jitted (0xdead)", "jitted",
		},
	}
	for _, tt := range tests {
		if got := frame(tt.f); got != tt.full {
			t.Errorf("frame(%+v) = %q, want %q", tt.f, got, tt.full)
		}
		if got := shortFrame(tt.f); got != tt.short {
			t.Errorf("shortFrame(%+v) = %q, want %q", tt.f, got, tt.short)
		}
	}
}

func TestCommand(t *testing.T) {
	got := command([]string{"/bin/app", "-x", "two words", "", `q"uote`})
	want := `/bin/app -x "two words" "" "q\"uote"`
	if got != want {
		t.Errorf("command = %s, want %s", got, want)
	}
}

// A row is said to be in the program its process exec'd last (every row
// of a process that exec'd is that image's), beside the command the
// process began as.
func TestProcessOfNamesTheProgramExecd(t *testing.T) {
	c := &analyze.Capture{
		Target: analyze.Target{Pid: 10, Command: []string{"/opt/kafka/bin/kafka-server-start.sh", "server.properties"}, Execs: []string{"/usr/bin/java -Xmx1G kafka.Kafka server.properties"}},
		Processes: []analyze.Target{
			{Pid: 11, Command: []string{"/bin/bash", "/opt/kafka/bin/kafka-run-class.sh"}, Execs: []string{"/usr/bin/env bash x", "ls /opt/kafka/libs"}},
			{Pid: 12, Command: []string{"sleep", "1"}},
			{Pid: 13, Execs: []string{"true"}},
		},
	}
	for _, tt := range []struct {
		pid  int
		want string
	}{
		{0, "pid 10, /usr/bin/java -Xmx1G kafka.Kafka server.properties (exec'd by /opt/kafka/bin/kafka-server-start.sh server.properties)"},
		{11, "pid 11, ls /opt/kafka/libs (exec'd by /bin/bash /opt/kafka/bin/kafka-run-class.sh)"},
		{12, "pid 12, sleep 1"},
		{13, "pid 13, true"},
		{14, "pid 14"},
	} {
		if got := processOf(c, &analyze.Site{Pid: tt.pid}); got != tt.want {
			t.Errorf("processOf(pid %d) = %q, want %q", tt.pid, got, tt.want)
		}
	}
}

func TestTextTop(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "leaky"), analyze.Options{})
	tests := []struct {
		top, stacks int
	}{
		{top: 0, stacks: len(r.Leaks)},
		{top: 1, stacks: 1},
		{top: 100, stacks: len(r.Leaks)},
		{top: -1, stacks: 0},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := Text(&b, r, TextOptions{Top: tt.top}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(b.String(), "\nrank "); got != tt.stacks {
			t.Errorf("Top %d printed %d stacks, want %d", tt.top, got, tt.stacks)
		}
	}
}

// Every loss that can make counts wrong gets the lost line; unknown frees
// alone, which change no count, get their own line instead.
func TestLostLine(t *testing.T) {
	for _, tc := range []struct {
		lost analyze.Lost
		want string
	}{
		{analyze.Lost{AllocationsDropped: 1}, "\nlost:"},
		{analyze.Lost{StackErrors: 1}, "\nlost:"},
		{analyze.Lost{FreesMissed: 1}, "\nlost:"},
		{analyze.Lost{PendingDropped: 1}, "\nlost:"},
		{analyze.Lost{UnknownFrees: 1}, "\nunknown:     1 frees of memory never seen allocated"},
		{analyze.Lost{UnknownFrees: 3, StackErrors: 1}, "unknown frees 3, stack errors 1"},
	} {
		var b bytes.Buffer
		if err := Text(&b, analyze.Rank(&analyze.Capture{Lost: tc.lost}, analyze.Options{}), TextOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v: no %q in\n%s", tc.lost, tc.want, b.String())
		}
		if tc.lost.UnknownFrees > 0 && tc.lost.StackErrors == 0 && strings.Contains(b.String(), "\nlost:") {
			t.Errorf("%+v: unknown frees alone printed the lost line", tc.lost)
		}
	}
}

type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteErrors(t *testing.T) {
	r := analyze.Rank(loadCapture(t, "leaky"), analyze.Options{})
	if err := Text(failWriter{}, r, TextOptions{}); !errors.Is(err, errWrite) {
		t.Errorf("Text error = %v, want %v wrapped", err, errWrite)
	}
	if err := JSON(failWriter{}, r); !errors.Is(err, errWrite) {
		t.Errorf("JSON error = %v, want %v wrapped", err, errWrite)
	}
}
