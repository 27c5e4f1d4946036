package interact_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
)

// TestShowCardInARun: the card comes right after executing, as a Card, and
// the call returns at once.
func TestShowCardInARun(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	args := `{"title":"Paris","body":"Sunny all week.","image_url":"https://example.com/paris.jpg","fields":[{"name":"High","value":"24 °C"},{"name":"Low","value":"15 °C"}]}`
	srv.Enqueue(
		planNeedTool(),
		agenttest.Reply().Call(0, "call_1", "show_card", args).Finish("tool_calls"),
		agenttest.Reply().Text("There you go.").Finish("stop"),
	)
	a := newAgent(t, srv, nil, interact.ShowCard())
	turn := a.NewTurn(agent.Input{Message: "show me Paris"})
	chunks, err := collect(turn.Run(t.Context()))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"text", "round_end:0",
		"tool:start:show_card", "tool:executing:show_card", "side:card:call_1", "tool:result:show_card",
		"round_end:1", "text", "round_end:2",
	}, trace(chunks))
	for _, c := range chunks {
		if c.Kind != agent.KindSide {
			continue
		}
		assert.Equal(t, interact.Card{
			Type: "card", Title: "Paris", Body: "Sunny all week.", ImageURL: "https://example.com/paris.jpg",
			Fields: []interact.Field{{Name: "High", Value: "24 °C"}, {Name: "Low", Value: "15 °C"}},
		}, c.Side)
		b, err := json.Marshal(c)
		require.NoError(t, err)
		assert.JSONEq(t, `{"kind":"side","round":1,"tool":{"id":"call_1","name":"show_card"},"side":{"type":"card","title":"Paris","body":"Sunny all week.","image_url":"https://example.com/paris.jpg","fields":[{"name":"High","value":"24 °C"},{"name":"Low","value":"15 °C"}]}}`, string(b))
	}
	assert.Equal(t, `card "Paris" shown to the user`, toolMessages(t, srv)["call_1"])
	validHistory(t, turn.Messages())
}

// TestShowCardRefusesBadCards: a card without a title or with an image URL
// a browser would run or should not load shows nothing; the model reads
// why.
func TestShowCardRefusesBadCards(t *testing.T) {
	leaktest.Check(t)
	for _, tc := range []struct{ args, want string }{
		{`{"title":"  ","body":"b"}`, "title is required"},
		{`{"title":"x","body":"b","image_url":"javascript:alert(1)"}`, "only http, https and data:image URLs"},
		{`{"title":"x","body":"b","image_url":"JavaScript:alert(1)"}`, "only http, https and data:image URLs"},
		{`{"title":"x","body":"b","image_url":" javascript:alert(1)"}`, "white space or control characters"},
		{`{"title":"x","body":"b","image_url":"java\tscript:alert(1)"}`, "white space or control characters"},
		{`{"title":"x","body":"b","image_url":"vbscript:msgbox"}`, "only http, https"},
		{`{"title":"x","body":"b","image_url":"file:///etc/passwd"}`, "only http, https"},
		{`{"title":"x","body":"b","image_url":"//evil.example/x.png"}`, "only http, https"},
		{`{"title":"x","body":"b","image_url":"/x.png"}`, "only http, https"},
		{`{"title":"x","body":"b","image_url":"https:///x.png"}`, "no host"},
		{`{"title":"x","body":"b","image_url":"data:text/html,<script>alert(1)</script>"}`, "must hold an image"},
		{`{"title":"x","body":"b","image_url":"data:image/svg+xml;base64,PHN2Zz4="}`, "SVG images can carry script"},
		{`{"title":"x","body":"b","image_url":"DATA:IMAGE/SVG+XML,<svg/>"}`, "SVG"},
		{`{"title":"x","body":"b","image_url":"data:,hello"}`, "must hold an image"},
		{`{"title":"x","body":"b","image_url":"data:image/;base64,AA=="}`, "must hold an image"},
	} {
		srv := newServer(t)
		srv.Enqueue(
			agenttest.Reply().Call(0, "call_1", "show_card", tc.args).Finish("tool_calls"),
			agenttest.Reply().Text("ok").Finish("stop"),
		)
		a := newAgent(t, srv, func(c *agent.Config) { c.DisablePlanning = true }, interact.ShowCard())
		chunks, err := collect(a.Run(t.Context(), agent.Input{Message: "card"}))
		require.NoError(t, err)
		assert.NotContains(t, strings.Join(trace(chunks), " "), "side:", tc.args)
		msg := toolMessages(t, srv)["call_1"]
		assert.True(t, strings.HasPrefix(msg, "error: "), msg)
		assert.Contains(t, msg, tc.want, tc.args)
	}
}

// TestShowCardAcceptsImages: http, https and raster data: URLs are shown.
func TestShowCardAcceptsImages(t *testing.T) {
	tool := interact.ShowCard()
	sm := tool.(agent.SideMessenger)
	for _, u := range []string{
		"http://example.com/a.png",
		"HTTPS://example.com/a.png?x=1#y",
		"data:image/png;base64,iVBORw0KGgo=",
		"data:image/jpeg;base64,/9j/4AAQ",
	} {
		args, err := json.Marshal(map[string]any{"title": "t", "body": "", "image_url": u})
		require.NoError(t, err)
		side, err := sm.SideMessage(context.Background(), agent.ToolCall{ID: "c", Name: "show_card", Arguments: args})
		require.NoError(t, err, u)
		assert.Equal(t, u, side.(interact.Card).ImageURL)
		res, err := tool.Execute(context.Background(), args, nil)
		require.NoError(t, err, u)
		assert.Equal(t, `card "t" shown to the user`, res)
	}
}

func TestShowCardDefinition(t *testing.T) {
	d := interact.ShowCard().Definition()
	assert.Equal(t, "show_card", d.Name)
	assert.True(t, d.SkipApproval)
	_, err := agent.NewToolRegistry(interact.ShowCard())
	require.NoError(t, err, "the schema is valid")
	for _, bad := range []string{`{"oops`, `[1,2]`, `{"title":"t","body":"b","extra":1}`} {
		_, err := interact.ShowCard().Execute(context.Background(), json.RawMessage(bad), nil)
		assert.Error(t, err, bad)
	}
}
