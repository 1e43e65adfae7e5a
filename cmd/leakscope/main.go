// Command leakscope finds native memory and resources a process acquired and
// never released, and names the code responsible.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/leakscope/leakscope/internal/termtext"
)

func main() {
	runShim()
	// SIGHUP (a closed terminal or ssh connection) ends a capture as Ctrl-C
	// and SIGTERM do: the report is written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(execute(ctx, os.Args[1:], ioStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}

// execute runs the command line and returns the process exit code:
// 0 success, 1 a --fail-on rule matched, 2 any error.
func execute(ctx context.Context, args []string, io ioStreams) int {
	root := newRootCmd(io)
	var budget memoryBudget
	budget.register(root)
	defer budget.stop()
	// After every flag is added: they walk the finished tree.
	addCompletions(root)
	addFlagSuggestions(root)
	refuseBinaryOnTerminal(root)
	root.SetArgs(args)
	err := suggestCommand(root.ExecuteContext(ctx))
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.code != 1 {
			printLine(io.Err, "leakscope: %v", ee.err)
		}
		return ee.code
	}
	printLine(io.Err, "leakscope: %v", err)
	return 2
}

// printLine writes one line to w: the formatted text through
// termtext.Sanitize, then a line feed. Every status, warning and error
// line goes through it, since errors and warnings quote strings the
// target controls (paths from its mappings, a JVM's attach reply): a
// control character in one then prints as an escape, and a line feed as
// \n instead of starting a line of its own (an error joining several
// lines prints them on one).
func printLine(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, "%s\n", termtext.Sanitize(fmt.Sprintf(format, a...)))
}

// exitError carries an exit code other than 2 (1: leak rule matched).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
