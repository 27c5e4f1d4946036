package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func call(state agent.ToolState, mut func(*agent.ToolCall)) agent.Chunk {
	tc := &agent.ToolCall{ID: "c1", Name: "run_command", State: state}
	if state != agent.StateStart {
		tc.Arguments = json.RawMessage(`{"command":"make"}`)
	}
	if mut != nil {
		mut(tc)
	}
	kind := agent.KindToolCall
	if state == agent.StateRejected {
		kind = agent.KindToolRejected
	}
	return agent.Chunk{Kind: kind, Round: 1, Tool: tc}
}

func TestHumanRenderer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		color, live bool
		chunks      []agent.Chunk
		want        string // with ANSI codes removed
	}{
		{
			name: "text and rounds",
			chunks: []agent.Chunk{
				{Kind: agent.KindText, Text: "Hello "}, {Kind: agent.KindText, Text: "there."},
				{Kind: agent.KindRoundEnd, Intent: agent.IntentNoTool},
				{Kind: agent.KindText, Round: 1, Text: "Done.\n"}, {Kind: agent.KindRoundEnd, Round: 1},
			},
			want: "Hello there.\nDone.\n",
		},
		{
			name: "reasoning is marked and ends its line",
			chunks: []agent.Chunk{
				{Kind: agent.KindReasoning, Round: 1, Text: "the user wants"}, {Kind: agent.KindReasoning, Round: 1, Text: " make"},
				{Kind: agent.KindText, Round: 1, Text: "Running it."},
			},
			want: "thinking: the user wants make\nRunning it.\n",
		},
		{
			name: "partial output, result cut to a few lines",
			chunks: []agent.Chunk{
				call(agent.StateStart, nil),
				call(agent.StateApprovalRequired, nil),
				call(agent.StateExecuting, nil),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = "one\ntw" }),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = "o\nthree" }),
				call(agent.StateResult, func(c *agent.ToolCall) { c.Result = "1\n2\n3\n4\n5\n6\n" }),
			},
			want: "⏺ run_command {\"command\":\"make\"}\n  … executing\n  │ one\n  │ two\n  │ three\n" +
				"  ✓ result: 1\n            2\n            3\n            4\n            … (2 more lines)\n",
		},
		{
			name: "output shown as it came is not repeated by the result",
			chunks: []agent.Chunk{
				call(agent.StateExecuting, nil),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = "one\ntwo\n" }),
				call(agent.StateResult, func(c *agent.ToolCall) { c.Result = "one\ntwo\n" }),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.ID = "c2"; c.PartialResult = "oops\n" }),
				call(agent.StateResult, func(c *agent.ToolCall) { c.ID = "c2"; c.Result = "oops\n\n[exit status 1]" }),
			},
			want: "⏺ run_command {\"command\":\"make\"}\n  … executing\n  │ one\n  │ two\n  ✓ done\n" +
				"⏺ run_command {\"command\":\"make\"}\n  │ oops\n  ✓ done: [exit status 1]\n",
		},
		{
			name: "long live output: the first lines, then the last ones",
			chunks: []agent.Chunk{
				call(agent.StateExecuting, nil),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = numbered(1, 30) }),
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = numbered(31, 50) }),
				call(agent.StateResult, func(c *agent.ToolCall) { c.Result = numbered(1, 50) }),
			},
			want: "⏺ run_command {\"command\":\"make\"}\n  … executing\n" + live(1, 20) +
				"  │ … (more output: its last lines are shown when the call ends)\n" +
				"  │ … (26 lines not shown)\n" + live(47, 50) + "  ✓ done\n",
		},
		{
			name: "long live output cut by an interrupt",
			chunks: []agent.Chunk{
				call(agent.StateExecuting, func(c *agent.ToolCall) { c.PartialResult = numbered(1, 22) + "last, unfinished" }),
				call(agent.StateRejected, func(c *agent.ToolCall) {
					c.Reason = agent.CauseInterrupted.DefaultReason()
					c.PartialResult = numbered(1, 22) + "last, unfinished"
				}),
				{Kind: agent.KindInterrupted, Round: 1},
			},
			want: "⏺ run_command {\"command\":\"make\"}\n" + live(1, 20) +
				"  │ … (more output: its last lines are shown when the call ends)\n" +
				live(21, 22) + "  │ last, unfinished\n  ✗ rejected: tool call interrupted\n⏹ interrupted\n",
		},
		{
			name: "interrupted with partial output not yet shown",
			chunks: []agent.Chunk{
				call(agent.StateStart, nil),
				call(agent.StateRejected, func(c *agent.ToolCall) {
					c.Arguments = nil
					c.Reason = agent.CauseInterrupted.DefaultReason()
					c.PartialResult = "half"
				}),
				{Kind: agent.KindInterrupted, Round: 1},
			},
			want: "⏺ run_command\n  ✗ rejected: tool call interrupted\n  partial output: half\n⏹ interrupted\n",
		},
		{
			name: "escape sequences from the model or a tool are removed",
			chunks: []agent.Chunk{
				{Kind: agent.KindText, Text: "a\x1b]0;pwned\x07b\r\n"},
				call(agent.StateResult, func(c *agent.ToolCall) { c.Result = "\x1b[2Jclear\u009b" }),
			},
			want: "a]0;pwnedb\n⏺ run_command {\"command\":\"make\"}\n  ✓ result: [2Jclear\n",
		},
		{
			name: "warning",
			chunks: []agent.Chunk{
				{Kind: agent.KindText, Round: 8, Text: "still going"},
				{Kind: agent.KindWarning, Round: 8, Code: agent.WarnMaxToolRounds, Text: "maximum tool rounds reached"},
			},
			want: "still going\n⚠ maximum tool rounds reached\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, color := range []bool{false, true} {
				var b bytes.Buffer
				r := newHumanRenderer(&b, color, false)
				for _, c := range tc.chunks {
					r.chunk(c)
				}
				r.endTurn()
				got := b.String()
				if !color {
					assert.NotContains(t, got, "\x1b", "no escape codes without colour")
				} else if strings.ContainsAny(tc.want, "⏺⚠⏹") {
					assert.Contains(t, got, "\x1b[", "colour on")
				}
				assert.Equal(t, tc.want, ansi.ReplaceAllString(got, ""), "color=%v", color)
			}
		})
	}
}

// numbered returns the lines "line from" to "line to", each ended by a
// newline.
func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// live is numbered as the renderer shows partial output.
func live(from, to int) string {
	return strings.ReplaceAll(numbered(from, to), "line ", "  │ line ")
}

// TestHumanRendererCallsThatCannotRun: a call of an unknown tool or with
// invalid arguments is rejected by the agent with a message for the model;
// it is shown as that error, not as somebody's rejection.
func TestHumanRendererCallsThatCannotRun(t *testing.T) {
	var b bytes.Buffer
	r := newHumanRenderer(&b, false, false)
	r.chunk(call(agent.StateRejected, func(c *agent.ToolCall) {
		c.Name, c.Cause, c.Reason = "run_comand", agent.CauseUnknownTool, `error: unknown tool "run_comand"`
	}))
	r.chunk(call(agent.StateRejected, func(c *agent.ToolCall) {
		c.ID, c.Cause, c.Reason = "c2", agent.CauseUser, "not now"
	}))
	r.endTurn()
	assert.Equal(t, "⏺ run_comand {\"command\":\"make\"}\n  ✗ error: unknown tool \"run_comand\"\n"+
		"⏺ run_command {\"command\":\"make\"}\n  ✗ rejected: not now\n", b.String())
}

func TestHumanRendererRejectionEndsRun(t *testing.T) {
	rejected := []agent.Chunk{
		call(agent.StateApprovalRequired, nil),
		call(agent.StateRejected, func(c *agent.ToolCall) { c.Reason = "rejected by user: not now" }),
		{Kind: agent.KindInterrupted, Round: 1},
	}
	for _, tc := range []struct {
		name      string
		cancelled error
		want      string
	}{
		{"a rejection, nobody pressed Ctrl-C", nil, "⏹ stopped: the tool call was rejected\n"},
		{"Ctrl-C", context.Canceled, "⏹ interrupted\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			r := newHumanRenderer(&b, false, false)
			r.cancelled = func() error { return tc.cancelled }
			for _, c := range rejected {
				r.chunk(c)
			}
			r.endTurn()
			assert.Equal(t, "⏺ run_command {\"command\":\"make\"}\n  ✗ rejected by user: not now\n"+tc.want, b.String())
		})
	}
}

func TestHumanRendererLiveStartLine(t *testing.T) {
	var b bytes.Buffer
	r := newHumanRenderer(&b, true, true)
	r.chunk(call(agent.StateStart, nil))
	assert.True(t, strings.HasSuffix(ansi.ReplaceAllString(b.String(), ""), "⏺ run_command …"), "shown at once: %q", b.String())
	r.chunk(call(agent.StateApprovalRequired, nil))
	got := b.String()
	i := strings.Index(got, "\r\x1b[K")
	assert.Positive(t, i, "the start line is erased: %q", got)
	assert.Equal(t, "⏺ run_command {\"command\":\"make\"}\n", ansi.ReplaceAllString(got[i+len("\r\x1b[K"):], ""))
}

func TestHumanRendererCard(t *testing.T) {
	var b bytes.Buffer
	r := newHumanRenderer(&b, false, false)
	r.chunk(agent.Chunk{Kind: agent.KindSide, Round: 1, Tool: &agent.ToolCall{ID: "c1", Name: "show_card"}, Side: interact.Card{
		Type:     interact.TypeCard,
		Title:    "Paris\x1b[2J",
		Body:     "Sunny all week, with a light breeze from the west in the afternoons and clear nights.\n\nBring sunglasses.",
		ImageURL: "data:image/png;base64,iVBORw0KGgo=",
		Fields:   []interact.Field{{Name: "High", Value: "24 °C"}, {Name: "Low", Value: "12 °C"}},
	}})
	r.endTurn()
	assert.Equal(t, ""+
		"  ┌──────────────────────────────────────────────────────────┐\n"+
		"  │ Paris[2J                                                 │\n"+
		"  ├──────────────────────────────────────────────────────────┤\n"+
		"  │ Sunny all week, with a light breeze from the west in the │\n"+
		"  │ afternoons and clear nights.                             │\n"+
		"  │                                                          │\n"+
		"  │ Bring sunglasses.                                        │\n"+
		"  │ High: 24 °C                                              │\n"+
		"  │ Low: 12 °C                                               │\n"+
		"  │ image: image/png inline (34 bytes)                       │\n"+
		"  └──────────────────────────────────────────────────────────┘\n", b.String(), "the box fits its longest line; escape sequences removed")

	// A title alone, a long word cut, an http image shown as its URL.
	b.Reset()
	r.chunk(agent.Chunk{Kind: agent.KindSide, Side: interact.Card{Title: "Hi", ImageURL: "https://example.com/a.png"}})
	r.chunk(agent.Chunk{Kind: agent.KindSide, Side: interact.Card{Title: strings.Repeat("x", 70)}})
	assert.Equal(t, ""+
		"  ┌──────────────────────────────────┐\n"+
		"  │ Hi                               │\n"+
		"  ├──────────────────────────────────┤\n"+
		"  │ image: https://example.com/a.png │\n"+
		"  └──────────────────────────────────┘\n"+
		"  ┌──────────────────────────────────────────────────────────────┐\n"+
		"  │ "+strings.Repeat("x", 60)+" │\n"+
		"  │ "+strings.Repeat("x", 10)+strings.Repeat(" ", 50)+" │\n"+
		"  └──────────────────────────────────────────────────────────────┘\n", b.String())

	// A long body is cut.
	b.Reset()
	r.chunk(agent.Chunk{Kind: agent.KindSide, Side: interact.Card{Title: "Many", Body: numbered(1, 30)}})
	assert.Equal(t, maxCardLines+4, strings.Count(b.String(), "\n"), "%s", b.String())
	assert.Contains(t, b.String(), "│ … (19 more lines)")
}

func TestHumanRendererSubAgentIndented(t *testing.T) {
	nested := func(depth int, c agent.Chunk) agent.Chunk {
		c.Depth, c.Agent, c.Parent = depth, "research", "c1"
		if depth == 2 {
			c.Agent, c.Parent = "research/search", "c1/c1"
		}
		return c
	}
	var b bytes.Buffer
	r := newHumanRenderer(&b, false, false)
	for _, c := range []agent.Chunk{
		call(agent.StateExecuting, func(c *agent.ToolCall) { c.Name, c.Arguments = "research", json.RawMessage(`{"task":"t"}`) }),
		nested(1, agent.Chunk{Kind: agent.KindText, Round: 1, Text: "Looking"}),
		nested(1, agent.Chunk{Kind: agent.KindText, Round: 1, Text: " it up.\nFirst"}),
		nested(1, call(agent.StateExecuting, nil)), // the same call id as the host's: another call
		nested(2, agent.Chunk{Kind: agent.KindText, Round: 1, Text: "deeper"}),
		nested(1, call(agent.StateResult, func(c *agent.ToolCall) { c.Result = "made" })),
		nested(1, agent.Chunk{Kind: agent.KindSide, Side: interact.Card{Title: "Card"}}),
		nested(1, agent.Chunk{Kind: agent.KindRoundEnd, Round: 1}),
		call(agent.StateResult, func(c *agent.ToolCall) { c.Name, c.Result = "research", "found" }),
		{Kind: agent.KindText, Round: 2, Text: "Done."},
	} {
		r.chunk(c)
	}
	r.endTurn()
	assert.Equal(t, ""+
		"⏺ research {\"task\":\"t\"}\n"+
		"  … executing\n"+
		"  research │ Looking it up.\n"+
		"  research │ First\n"+
		"  research │ ⏺ run_command {\"command\":\"make\"}\n"+
		"  research │   … executing\n"+
		"    research/search │ deeper\n"+
		"  research │   ✓ result: made\n"+
		"  research │   ┌──────────────────────┐\n"+
		"  research │   │ Card                 │\n"+
		"  research │   └──────────────────────┘\n"+
		"  ✓ result: found\n"+
		"Done.\n", b.String())
}
