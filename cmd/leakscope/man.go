package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd is the hidden command make man runs: one man page per
// command (leakscope.1, leakscope-run.1, ...) from the command tree, so
// the pages say what --help says.
func newManCmd(io ioStreams) *cobra.Command {
	return &cobra.Command{
		Use:    "__man DIR",
		Short:  "Write the man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			var walk func(c *cobra.Command)
			walk = func(c *cobra.Command) {
				c.DisableAutoGenTag = true // no generation date in the page body
				for _, sub := range c.Commands() {
					walk(sub)
				}
			}
			walk(root)
			b := readBuildInfo()
			date := manDate(b.Date)
			header := &doc.GenManHeader{
				Section: "1",
				Source:  "leakscope " + b.Version,
				Manual:  "leakscope manual",
				Date:    &date,
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			return nil
		},
	}
}

// manDate is the date a page's footer shows: the build date, else
// SOURCE_DATE_EPOCH, else today, so a rebuild of one commit writes the
// same pages.
func manDate(build string) time.Time {
	if t, err := time.Parse(time.RFC3339, build); err == nil {
		return t.UTC()
	}
	if n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(n, 0).UTC()
	}
	return time.Now().UTC()
}
