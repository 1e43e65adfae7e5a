package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestCommand puts cobra's suggestions for a mistyped command
// ("unknown command ... \n\nDid you mean this?\n\trun\n") on the error's
// one line: unknown command "rn" for "leakscope" (did you mean run?).
// Cobra suggests names within SuggestionsMinimumDistance (2) edits, or
// that start with what was typed.
func suggestCommand(err error) error {
	if err == nil {
		return nil
	}
	msg, list, ok := strings.Cut(err.Error(), "\n\nDid you mean this?\n")
	if !ok {
		return err
	}
	var names []string
	for _, l := range strings.Split(list, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return errors.New(msg)
	}
	return fmt.Errorf("%s (did you mean %s?)", msg, orList(names))
}

var (
	unknownLong  = regexp.MustCompile(`^unknown flag: --([^\s=]+)`)
	unknownShort = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^-\s=][^\s=]+)`)
)

// addFlagSuggestions makes an unknown flag's error name the flags it may
// have meant, which cobra does only for commands:
// unknown flag: --formt (did you mean --format?). A long flag given with
// one dash (-format) is suggested with two.
func addFlagSuggestions(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		typed := ""
		if m := unknownLong.FindStringSubmatch(err.Error()); m != nil {
			typed = m[1]
		} else if m := unknownShort.FindStringSubmatch(err.Error()); m != nil {
			typed = m[1]
		}
		if typed == "" {
			return err
		}
		if s := flagSuggestions(c.Flags(), typed); len(s) > 0 {
			return fmt.Errorf("%w (did you mean %s?)", err, orList(s))
		}
		return err
	})
}

// flagSuggestions are the visible flags nearest typed, at most 3: those
// that start with it (3 characters or more), or else those within 2 edits
// of it at the least distance.
func flagSuggestions(fs *pflag.FlagSet, typed string) []string {
	type cand struct {
		name    string
		d, edit int // d: 1 for a name typed in part, else edit
	}
	var cs []cand
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		c := cand{f.Name, editDistance(typed, f.Name), editDistance(typed, f.Name)}
		if len(typed) >= 3 && strings.HasPrefix(f.Name, typed) {
			c.d = 1
		}
		if c.d <= 2 {
			cs = append(cs, c)
		}
	})
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		if cs[i].edit != cs[j].edit {
			return cs[i].edit < cs[j].edit
		}
		return cs[i].name < cs[j].name
	})
	if len(cs) > 0 {
		// The closest only: --formt means --format, not --force.
		n := 1
		for n < len(cs) && cs[n].d == cs[0].d {
			n++
		}
		cs = cs[:n]
	}
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, "--"+cs[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// orList writes a, b or c.
func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
