// Command leakscope finds native memory and resources a process acquired and
// never released, and names the code responsible.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/leakscope/leakscope/probe"
)

func main() {
	probe.RunShim()
	// SIGHUP (a closed terminal or ssh session) ends a capture as Ctrl-C
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
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.code != 1 {
			fmt.Fprintf(io.Err, "leakscope: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(io.Err, "leakscope: %v\n", err)
	return 2
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
