package skills

import (
	"context"
	"strings"

	"github.com/planround/planround/memory"
)

// Intro starts the skills block of the layer, before the list of the
// enabled skills.
const Intro = `You have skills: instructions for particular kinds of tasks, listed below with what each is for. ` +
	`Before you work on a task that a skill's description fits, call ` + ToolName + ` with the skill's name to read its full instructions, then follow them.`

// Layer returns a context layer (for agent.Config.Layers) that gives the
// model one system block listing the skills enabled for the run (see
// Set.Enabled), each as "- name: description" with its description on one
// line, after Intro. With no skill enabled, there is no block.
//
// The agent sends the blocks of its layers right after the system prompt,
// in the order of Config.Layers; put this layer first to have the block
// follow the system prompt directly.
func (s *Set) Layer() memory.Layer {
	return memory.LayerFunc(func(ctx context.Context, sessionID string) ([]string, error) {
		on := s.Enabled(ctx, sessionID)
		if len(on) == 0 {
			return nil, nil
		}
		var b strings.Builder
		b.WriteString(Intro)
		b.WriteString("\n")
		for _, sk := range on {
			b.WriteString("\n- ")
			b.WriteString(sk.Name)
			b.WriteString(": ")
			b.WriteString(strings.Join(strings.Fields(sk.Description), " "))
		}
		return []string{b.String()}, nil
	})
}
