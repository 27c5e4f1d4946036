package skills

import (
	"context"
	"slices"
)

// enabledKey is the context key of WithEnabled's names.
type enabledKey struct{}

// WithEnabled returns a copy of ctx that enables the named skills, and only
// them, for what runs with it: a host passes it as the context of an agent
// run (the web chat from its skill picker, sent with each message; a CLI from
// its flags), and the Set's layer and get_skill read it there. With no
// names, no skill is enabled. Names a Set does not hold are ignored.
func WithEnabled(ctx context.Context, names ...string) context.Context {
	return context.WithValue(ctx, enabledKey{}, slices.Clone(names))
}

// Enabled returns the skills enabled for a run with ctx in the session
// sessionID, sorted by name:
//
//   - the names ctx carries, when it was made by WithEnabled;
//   - else the names of the Set's selector (WithSelector);
//   - else every skill of the Set.
//
// The layer and get_skill use it; a host may too, to show the choice.
func (s *Set) Enabled(ctx context.Context, sessionID string) []Skill {
	names, ok := ctx.Value(enabledKey{}).([]string)
	switch {
	case ok:
	case s.selector != nil:
		names = s.selector(ctx, sessionID)
	default:
		return s.Skills()
	}
	var out []Skill
	for _, sk := range s.skills {
		if slices.Contains(names, sk.Name) {
			out = append(out, sk)
		}
	}
	return out
}

// enabled reports whether the skill name is enabled for a run with ctx in
// the session sessionID, and returns it.
func (s *Set) enabled(ctx context.Context, sessionID, name string) (sk Skill, known, on bool) {
	sk, known = s.Lookup(name)
	if !known {
		return Skill{}, false, false
	}
	return sk, true, slices.ContainsFunc(s.Enabled(ctx, sessionID), func(e Skill) bool { return e.Name == name })
}
