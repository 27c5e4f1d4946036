package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

// TestBeginKeepsNoCopyOfTheUserMessage checks that a run with history
// keeps the history, shortened, and not a second copy of the user's
// message and its image bytes: requests send the one in the turn's record.
func TestBeginKeepsNoCopyOfTheUserMessage(t *testing.T) {
	a, err := New(Config{Model: "m"})
	require.NoError(t, err)
	r := &run{a: a, t: &Turn{a: a}, ctx: context.Background(), tools: a.cfg.Tools.tools()}
	history := []memory.Message{{Role: memory.RoleUser, Content: "hi"}, {Role: memory.RoleAssistant, Content: "hello"}}
	user := memory.Message{Role: memory.RoleUser, Content: "look", Images: []memory.Image{{MIMEType: "image/png", Data: []byte("png")}}}
	r.begin(history, user)
	require.Len(t, r.past, 2)
	assert.Equal(t, []memory.Message{user}, r.t.msgs)
	for i, m := range r.past[:cap(r.past)] {
		assert.Empty(t, m.Images, "past's slot %d holds images", i)
	}
	msgs := r.requestMessages("")
	require.Len(t, msgs, 3)
	assert.Equal(t, "look", msgs[2].Content)
	assert.Len(t, msgs[2].Images, 1)
}
