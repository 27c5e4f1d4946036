package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/planround/planround/agent/skills"
)

// loadSkills loads the skills of -skills and checks the names of
// -enable-skill against them (a usageError for a name it does not hold). A
// skill folder that cannot be loaded is said on stderr; the others load.
func loadSkills(opts options, stderr io.Writer) (*skills.Set, error) {
	set, err := skills.LoadDir(opts.skills)
	if err != nil {
		return nil, fmt.Errorf("-skills %s: %w", opts.skills, err)
	}
	for _, sk := range set.Skipped() {
		fmt.Fprintf(stderr, "cli: -skills: %s left out: %v\n", sk.Dir, sk.Err)
	}
	names := set.Names()
	for _, n := range opts.enable {
		if !slices.Contains(names, n) {
			found := strings.Join(names, ", ")
			if found == "" {
				found = "none"
			}
			return nil, usageError{fmt.Sprintf("-enable-skill %s: no skill of that name in %s (found: %s)", n, opts.skills, found)}
		}
	}
	if opts.verbose {
		enabled := "all"
		if len(opts.enable) > 0 {
			enabled = strings.Join(opts.enable, ", ")
		}
		fmt.Fprintf(stderr, "cli: skills: %s (enabled: %s)\n", strings.Join(names, ", "), enabled)
	}
	return set, nil
}
