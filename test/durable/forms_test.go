package durable

import (
	"context"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
)

// isForm matches the side chunk of a form_request.
func isForm(e event) bool {
	if e.Chunk == nil || e.Chunk.Kind != agent.KindSide {
		return false
	}
	m, ok := e.Chunk.Side.(map[string]any)
	return ok && m["type"] == interact.TypeFormRequest
}

// formID returns the form id of a form_request side chunk.
func formID(t testing.TB, e event) string {
	t.Helper()
	m, _ := e.Chunk.Side.(map[string]any)
	id, _ := m["form_id"].(string)
	if id == "" {
		t.Fatalf("form_request without a form id: %v", e.Chunk.Side)
	}
	return id
}

// forms returns the open forms of the session, as a front end lists them.
func (r *replica) forms(ctx context.Context, t testing.TB, session string) []interact.PendingForm {
	t.Helper()
	var forms []interact.PendingForm
	if err := r.get(ctx, "/forms?session="+neturl.QueryEscape(session), &forms); err != nil {
		t.Fatal(err)
	}
	return forms
}

// TestFormAnsweredOnAnotherReplicaAfterKill: a turn on A asks a form
// (ask_user_question); once the form is shown and stored, A is killed
// (SIGKILL) while its call waits. The answers, posted to B, are taken;
// once A's lease expired B resumes the turn, runs the ask_user_question
// call again, which takes the answers, and the model gets them: the turn's
// final text echoes the tool message it was given. The history is valid,
// the call is closed and the form no longer open.
//
// It needs the agent of branch w21-agent: a resumed turn runs a resumable
// tool found executing again (without it the call is reported stopped).
func TestFormAnsweredOnAnotherReplicaAfterKill(t *testing.T) {
	checkLeaks(t)
	a, b, _ := twoReplicas(t)
	ctx := testContext(t, 60*time.Second)

	turn := a.turn(ctx, t, "s1", "ask-1")
	ex := turn.waitFor(ctx, t, "the ask_user_question call executing", isState(agent.StateExecuting)).tool()
	require.Equal(t, "ask_user_question", ex.Name)
	id := formID(t, turn.waitFor(ctx, t, "the form_request", isForm))
	forms := b.forms(ctx, t, "s1")
	require.Len(t, forms, 1, "the open forms of the session, as B lists them")
	require.Equal(t, id, forms[0].FormID)
	require.Equal(t, ex.ID, forms[0].CallID)
	a.kill()

	ev := b.events(ctx, t, "s1")
	status, body, err := b.answerForm(ctx, "s1", id, map[string]any{"color": "blue", "note": "from replica B"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"success":true`)

	// B resumes the turn (after A's lease, 2 s, expired) and runs the
	// call again: the same call, which takes the answers.
	first := ev.waitFor(ctx, t, "the call executing on B", func(e event) bool {
		return e.Run == "resume" && (e.End || isState(agent.StateExecuting)(e))
	})
	require.False(t, first.End, "the resumed turn ended without running the call again:\n%s", ev.history())
	again := first.tool()
	assert.Equal(t, ex.ID, again.ID, "B ran another call than the one A asked with")
	res := ev.waitFor(ctx, t, "the call's result on B", resumed(isState(agent.StateResult))).tool()
	assert.Contains(t, res.Result, "blue")
	assert.Contains(t, res.Result, "from replica B")
	ev.waitFor(ctx, t, "the end of the resumed run", isEnd("resume"))

	msgs := b.history(ctx, t, "s1")
	checkHistory(t, msgs)
	require.NotEmpty(t, msgs)
	last := msgs[len(msgs)-1]
	assert.Equal(t, memory.RoleAssistant, last.Role)
	// The model echoes the tool message it was given: the answers reached
	// it.
	assert.True(t, strings.HasPrefix(last.Content, "done: ask-1; answers: "), "the final text: %q", last.Content)
	assert.Contains(t, last.Content, `"blue"`)
	assert.Contains(t, last.Content, "from replica B")
	assert.Empty(t, b.forms(ctx, t, "s1"), "forms left open after the turn")
	calls, err := b.openCalls(ctx, "s1")
	require.NoError(t, err)
	assert.Empty(t, calls, "open calls left after the resumed turn")

	// A second answer to the answered form is stale.
	status, body, err = b.answerForm(ctx, "s1", id, map[string]any{"color": "red", "note": "late"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"success":false`)
}
