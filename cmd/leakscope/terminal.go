package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// binaryFormats write bytes a terminal cannot show.
var binaryFormats = map[string]bool{"pprof": true}

// refuseBinaryOnTerminal makes every command with --format refuse, before
// it starts tracing, to write a binary format to standard output when that
// is a terminal: exit 2 and one line saying to give -o.
func refuseBinaryOnTerminal(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("format") != nil {
			prev := c.PreRunE
			c.PreRunE = func(cmd *cobra.Command, args []string) error {
				if err := checkBinaryOnTerminal(cmd); err != nil {
					return err
				}
				if prev != nil {
					return prev(cmd, args)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func checkBinaryOnTerminal(cmd *cobra.Command) error {
	value := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	format := value("format")
	if !binaryFormats[format] || value("http") != "" {
		return nil // report --http serves the profile instead
	}
	if out := value("output"); out != "" && out != "-" {
		return nil
	}
	if !isTerminal(cmd.OutOrStdout()) {
		return nil
	}
	return fmt.Errorf("--format %s is binary and standard output is a terminal: give -o FILE (or redirect standard output)", format)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd())
}
