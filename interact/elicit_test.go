package interact_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
)

// cityForm is a requested schema of a city (required) and a number of
// nights from 1 to 14.
const cityForm = `{"type":"object","properties":{` +
	`"city":{"type":"string","title":"City","enum":["Paris","Rome"],"enumNames":["Paris, France","Rome, Italy"]},` +
	`"nights":{"type":"integer","minimum":1,"maximum":14}},"required":["city"]}`

// elicitTool is a tool that asks what req asks through forms and answers
// with the answer as JSON, or the error.
func elicitTool(forms *person.Forms, req interact.ElicitationRequest) agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{Name: "book", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
			ans, err := forms.Elicit(ctx, req)
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(ans)
			return string(b), err
		},
	}
}

// elicitRun runs a turn of session s1 that calls elicitTool once; onShown
// gets each elicitation_request shown. It returns the tool message.
func elicitRun(t *testing.T, forms *person.Forms, session string, req interact.ElicitationRequest, onShown func(interact.ElicitationRequest)) string {
	t.Helper()
	srv := newServer(t)
	srv.Enqueue(
		agenttest.Reply().Call(0, "call_1", "book", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("ok").Finish("stop"),
	)
	a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, elicitTool(forms, req))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for c, err := range a.Run(ctx, agent.Input{SessionID: session, Message: "book"}) {
		require.NoError(t, err)
		if c.Kind == agent.KindSide {
			r, ok := c.Side.(interact.ElicitationRequest)
			require.True(t, ok, "side %T", c.Side)
			onShown(r)
		}
	}
	require.NoError(t, ctx.Err())
	return toolMessages(t, srv)["call_1"]
}

// TestElicitForm: the form is shown beside the call with its fields, in the
// schema's order; content that does not fit the schema is refused with an
// error (ErrInvalidAnswers) that says what does not fit, and leaves the
// form open; the valid
// answer is what Elicit returns.
func TestElicitForm(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t, person.FormsConfig{})
	req := interact.ElicitationRequest{Server: "travel", Message: "Where to?", Schema: json.RawMessage(cityForm)}
	got := elicitRun(t, forms, "s1", req, func(r interact.ElicitationRequest) {
		assert.Equal(t, interact.TypeElicitationRequest, r.Type)
		assert.Equal(t, interact.ModeForm, r.Mode)
		assert.Equal(t, "travel", r.Server)
		assert.Equal(t, []interact.ElicitField{
			{Name: "city", Title: "City", Type: "string", Options: []string{"Paris", "Rome"}, Labels: []string{"Paris, France", "Rome, Italy"}, Required: true},
			{Name: "nights", Type: "integer"},
		}, r.Fields)
		p := pending(t, forms, "s1")
		require.Len(t, p, 1)
		assert.Equal(t, r.FormID, p[0].FormID)
		require.NotNil(t, p[0].Elicitation)
		assert.Equal(t, "Where to?", p[0].Elicitation.Message)

		el := func(action string, content map[string]any) *interact.ElicitationAnswer {
			return &interact.ElicitationAnswer{Action: action, Content: content}
		}
		for _, tc := range []struct {
			reply interact.FormReply
			err   string
		}{
			{interact.FormReply{Elicitation: el("accept", map[string]any{"nights": 3})}, "city"},
			{interact.FormReply{Elicitation: el("accept", map[string]any{"city": "Oslo"})}, "/city"},
			{interact.FormReply{Elicitation: el("accept", map[string]any{"city": "Rome", "nights": 30})}, "14"},
			{interact.FormReply{Elicitation: el("accept", nil)}, "needs its content"},
			{interact.FormReply{Elicitation: el("maybe", nil)}, "want accept, decline or cancel"},
			{interact.FormReply{Answers: interact.Answers{"q1": {"x"}}}, "an elicitation is answered with an action"},
		} {
			tc.reply.SessionID, tc.reply.FormID = "s1", r.FormID
			open, err := forms.Answer(t.Context(), tc.reply)
			assert.ErrorIs(t, err, interact.ErrInvalidAnswers, "%+v", tc.reply)
			assert.ErrorContains(t, err, tc.err, "%+v", tc.reply)
			assert.False(t, open)
		}
		_, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s2", FormID: r.FormID, Elicitation: el("decline", nil)})
		assert.ErrorIs(t, err, interact.ErrWrongSession)
		open, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: r.FormID,
			Elicitation: el("accept", map[string]any{"city": "Rome", "nights": 3})})
		assert.NoError(t, err)
		assert.True(t, open)
	})
	assert.JSONEq(t, `{"action":"accept","content":{"city":"Rome","nights":3}}`, got)
	assert.Empty(t, pending(t, forms, "s1"))
}

// TestElicitURL: a URL request shows the host; its answer carries no
// content, and declining passes nothing typed on.
func TestElicitURL(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t, person.FormsConfig{})
	req := interact.ElicitationRequest{Server: "pay", Mode: interact.ModeURL, Message: "Link your account", URL: "https://pay.example.com:8443/link?x=1"}
	for _, action := range []string{interact.ActionAccept, interact.ActionDecline, interact.ActionCancel} {
		got := elicitRun(t, forms, "s1", req, func(r interact.ElicitationRequest) {
			assert.Equal(t, "pay.example.com", r.Host)
			assert.Equal(t, req.URL, r.URL)
			assert.Empty(t, r.Fields)
			ok, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: r.FormID,
				Elicitation: &interact.ElicitationAnswer{Action: action, Content: map[string]any{"typed": "x"}}})
			require.NoError(t, err)
			require.True(t, ok)
		})
		assert.JSONEq(t, `{"action":"`+action+`"}`, got)
	}
}

// TestElicitURLHomograph: a link to an international host is shown with
// the host as punycode, as browsers show a name that mixes scripts, and
// the link that opens is the one shown.
func TestElicitURLHomograph(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t, person.FormsConfig{})
	req := interact.ElicitationRequest{Server: "pay", Mode: interact.ModeURL, Message: "Sign in", URL: "https://\u0430pple.com/login"}
	got := elicitRun(t, forms, "s1", req, func(r interact.ElicitationRequest) {
		assert.Equal(t, "xn--pple-43d.com", r.Host, "the Cyrillic а shows")
		assert.Equal(t, "https://xn--pple-43d.com/login", r.URL)
		ok, err := forms.Answer(t.Context(), interact.FormReply{SessionID: "s1", FormID: r.FormID,
			Elicitation: &interact.ElicitationAnswer{Action: interact.ActionDecline}})
		require.NoError(t, err)
		require.True(t, ok)
	})
	assert.JSONEq(t, `{"action":"decline"}`, got)
}

// TestElicitCancelled: a form cancelled with its session is answered
// cancel.
func TestElicitCancelled(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t, person.FormsConfig{})
	req := interact.ElicitationRequest{Server: "travel", Message: "Where to?", Schema: json.RawMessage(cityForm)}
	got := elicitRun(t, forms, "s1", req, func(interact.ElicitationRequest) {
		n, err := forms.CancelSession(t.Context(), "s1")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
	})
	assert.JSONEq(t, `{"action":"cancel"}`, got)
}

// TestElicitRefuses: what makes no form is refused before anything is
// shown: secrets asked in a form, schemas beyond the specification's,
// URLs that are not http(s); and a run without a session has nobody to
// ask.
func TestElicitRefuses(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t, person.FormsConfig{})
	for _, tc := range []struct {
		req  interact.ElicitationRequest
		want error
	}{
		{interact.ElicitationRequest{Schema: json.RawMessage(`{"type":"object","properties":{"password":{"type":"string"}}}`)}, interact.ErrSecretField},
		{interact.ElicitationRequest{Schema: json.RawMessage(`{"type":"object","properties":{"k":{"type":"string","title":"Your API key"}}}`)}, interact.ErrSecretField},
		{interact.ElicitationRequest{Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"object"}}}`)}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{Mode: interact.ModeURL, URL: "javascript:alert(1)"}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{Mode: interact.ModeURL, URL: "https://user:pw@example.com/"}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{Mode: "voice"}, interact.ErrInvalidForm},
		// Hosts that hide what they are, and a link beyond the bound.
		{interact.ElicitationRequest{Mode: interact.ModeURL, URL: "https://app\u200ble.com/"}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{Mode: interact.ModeURL, URL: "https://\u202emoc.elppa/"}, interact.ErrInvalidForm},
		{interact.ElicitationRequest{Mode: interact.ModeURL, URL: "https://example.com/?q=" + strings.Repeat("a", interact.MaxURLBytes)}, interact.ErrInvalidForm},
	} {
		got := elicitRun(t, forms, "s1", tc.req, func(r interact.ElicitationRequest) {
			t.Errorf("shown %+v", r)
		})
		assert.Contains(t, got, strings.TrimPrefix(tc.want.Error(), "interact: "), "%+v", tc.req)
	}
	// The words of a secret, however written, as a field's name or title.
	for _, words := range []string{"token", "API token", "GitHub token", "PIN", "Passwort", "one-time code",
		"pass\u200bword", "API\u00a0token", "p\u0430ssword", "\u0442oken"} {
		for _, schema := range []map[string]any{
			{"type": "object", "properties": map[string]any{words: map[string]any{"type": "string"}}},
			{"type": "object", "properties": map[string]any{"value": map[string]any{"type": "string", "title": words}}},
		} {
			b, err := json.Marshal(schema)
			require.NoError(t, err)
			got := elicitRun(t, forms, "s1", interact.ElicitationRequest{Schema: b}, func(r interact.ElicitationRequest) {
				t.Errorf("a form asking for %q was shown: %+v", words, r)
			})
			assert.Contains(t, got, strings.TrimPrefix(interact.ErrSecretField.Error(), "interact: "), "%q", words)
		}
	}
	_, err := forms.Elicit(t.Context(), interact.ElicitationRequest{Schema: json.RawMessage(cityForm)})
	assert.True(t, errors.Is(err, interact.ErrNoSession), "%v", err)
	assert.Zero(t, forms.Len())
}
