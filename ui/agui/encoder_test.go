package agui

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/stream"
)

// encode runs events through an Encoder and returns the events it wrote,
// decoded, checking that each is one "data:" line of JSON.
func encode(t *testing.T, known []string, events ...runner.Event) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	e := NewEncoder(&buf, "th", "run1")
	e.Known(known...)
	if err := e.Begin(); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := e.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.End(); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, block := range strings.SplitAfter(buf.String(), "\n\n") {
		if block == "" {
			continue
		}
		line, ok := strings.CutPrefix(block, "data: ")
		if !ok || !strings.HasSuffix(line, "}\n\n") || strings.Count(line, "\n") != 2 {
			t.Fatalf("not one data line: %q", block)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func chunk(c agent.Chunk) runner.Event {
	return runner.Event{Kind: runner.EventChunk, Turn: 3, Chunk: &c}
}

func ended(st runner.Status, msg string) runner.Event {
	return runner.Event{Kind: runner.EventTurnEnded, Turn: 3, Ended: &runner.TurnEnded{Status: st, Error: msg}}
}

func find(events []map[string]any, typ string) map[string]any {
	for _, e := range events {
		if e["type"] == typ {
			return e
		}
	}
	return nil
}

func TestEncoderMapping(t *testing.T) {
	weather := &agent.ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lima"}`)}
	with := func(tc *agent.ToolCall, f func(*agent.ToolCall)) *agent.ToolCall {
		c := *tc
		f(&c)
		return &c
	}
	tests := []struct {
		name   string
		known  []string
		events []runner.Event
		want   string
		check  func(t *testing.T, events []map[string]any)
	}{{
		name: "reasoning then text, one message per round",
		events: []runner.Event{
			{Kind: runner.EventTurnStarted, Seq: 3, Turn: 3, Started: &runner.TurnStarted{Message: "hi"}},
			chunk(agent.Chunk{Kind: agent.KindReasoning, Round: 1, Text: "hmm"}),
			chunk(agent.Chunk{Kind: agent.KindText, Round: 1, Text: "Hi"}),
			chunk(agent.Chunk{Kind: agent.KindText, Round: 1, Text: ""}),
			chunk(agent.Chunk{Kind: agent.KindRoundEnd, Round: 1, FinishReason: "stop", Usage: &stream.Usage{PromptTokens: 7, CompletionTokens: 2}}),
			ended(runner.StatusFinished, ""),
		},
		want: "RUN_STARTED STEP_STARTED REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT REASONING_MESSAGE_END REASONING_END TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END CUSTOM STEP_FINISHED RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			if id := find(events, "TEXT_MESSAGE_START")["messageId"]; id != "th.3.1" {
				t.Errorf("messageId %v, want th.3.1 (thread, turn, round)", id)
			}
			fin := find(events, "RUN_FINISHED")
			if got := mustJSON(fin["usage"]); string(got) != `[{"inputTokens":7,"outputTokens":2,"totalTokens":9}]` {
				t.Errorf("usage %s", got)
			}
			if got := mustJSON(fin["outcome"]); string(got) != `{"type":"success"}` {
				t.Errorf("outcome %s", got)
			}
		},
	}, {
		name: "streamed arguments of two calls, then an approval",
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: &agent.ToolCall{ID: "c1", Name: "get_weather", State: agent.StateStart}}),
			chunk(agent.Chunk{Kind: agent.KindToolInput, Round: 1, Text: `{"city":`, Tool: &agent.ToolCall{ID: "c1", Name: "get_weather", State: agent.StateStart}}),
			chunk(agent.Chunk{Kind: agent.KindToolInput, Round: 1, Text: `"Lima"}`, Tool: &agent.ToolCall{ID: "c1", Name: "get_weather", State: agent.StateStart}}),
			chunk(agent.Chunk{Kind: agent.KindToolInput, Round: 1, Text: `{}`, Tool: &agent.ToolCall{ID: "c2", Name: "slow_task", State: agent.StateStart}}),
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: with(weather, func(c *agent.ToolCall) {
				c.State, c.ApprovalRequired, c.ApprovalID, c.ArgumentsDigest = agent.StateApprovalRequired, true, "ap1", "sha256:x"
				c.Hints = &agent.ToolHints{ReadOnly: true}
			})}),
		},
		want: "RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_ARGS TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_END STEP_FINISHED RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			in := find(events, "RUN_FINISHED")["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
			if in["id"] != "ap1" || in["reason"] != ReasonToolApproval || in["toolCallId"] != "c1" {
				t.Errorf("interrupt %v", in)
			}
			if m := string(mustJSON(in["metadata"])); !strings.Contains(m, `"argumentsDigest":"sha256:x"`) || !strings.Contains(m, `"hints":["read-only"`) {
				t.Errorf("metadata %s", m)
			}
		},
	}, {
		name:  "a call the client holds goes on without opening again",
		known: []string{"c1"},
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: with(weather, func(c *agent.ToolCall) { c.State = agent.StateExecuting })}),
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: with(weather, func(c *agent.ToolCall) { c.State, c.Result = agent.StateResult, "sunny" })}),
			ended(runner.StatusFinished, ""),
		},
		want: "RUN_STARTED STEP_STARTED TOOL_CALL_RESULT STEP_FINISHED RUN_FINISHED",
	}, {
		name: "a call shown first when it runs, then rejected",
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: with(weather, func(c *agent.ToolCall) { c.State = agent.StateExecuting })}),
			chunk(agent.Chunk{Kind: agent.KindToolRejected, Round: 1, Tool: with(weather, func(c *agent.ToolCall) {
				c.State, c.Cause, c.Reason = agent.StateRejected, agent.CauseTimeout, "too slow"
			})}),
			{Kind: runner.EventTurnEnded, Ended: &runner.TurnEnded{Status: runner.StatusRejected, Cause: agent.CauseTimeout, Reason: "too slow"}},
		},
		want: "RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END CUSTOM TOOL_CALL_RESULT STEP_FINISHED CUSTOM RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			if args := find(events, "TOOL_CALL_ARGS")["delta"]; args != `{"city":"Lima"}` {
				t.Errorf("arguments %v", args)
			}
			if v := find(events, "CUSTOM")["value"].(map[string]any); v["cause"] != "timeout" || v["reason"] != "too slow" {
				t.Errorf("rejection %v", v)
			}
		},
	}, {
		name: "a failed turn is a RUN_ERROR",
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindText, Round: 0, Text: "Hi"}),
			ended(runner.StatusError, "the model is down"),
		},
		want: "RUN_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED CUSTOM RUN_ERROR",
		check: func(t *testing.T, events []map[string]any) {
			if e := events[len(events)-1]; e["message"] != "the model is down" || e["code"] != "error" {
				t.Errorf("RUN_ERROR %v", e)
			}
		},
	}, {
		name:   "an interrupted turn is cancelled",
		events: []runner.Event{chunk(agent.Chunk{Kind: agent.KindWarning, Round: 0, Code: agent.WarnLength, Text: "cut"}), ended(runner.StatusInterrupted, "")},
		want:   "RUN_STARTED STEP_STARTED CUSTOM STEP_FINISHED CUSTOM RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			if w := events[2]; w["name"] != CustomWarning {
				t.Errorf("warning %v", w)
			}
			if got := mustJSON(events[len(events)-1]["outcome"]); string(got) != `{"type":"cancelled"}` {
				t.Errorf("outcome %s", got)
			}
		},
	}, {
		name: "an elicitation asks with its own schema; a side that is no object is CUSTOM",
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindSide, Round: 1, Tool: weather, Side: "plain"}),
			chunk(agent.Chunk{Kind: agent.KindSide, Round: 1, Tool: &agent.ToolCall{ID: "c9", Name: "gh", Arguments: json.RawMessage(`{}`)}, Side: interact.ElicitationRequest{
				Type: interact.TypeElicitationRequest, FormID: "f1", Server: "github", Mode: interact.ModeForm, Message: "Which repo?",
				Schema: json.RawMessage(`{"type":"object","properties":{"repo":{"type":"string"}}}`),
			}}),
		},
		want: "RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END CUSTOM TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			if v := find(events, "CUSTOM"); v["name"] != CustomSide {
				t.Errorf("side %v", v)
			}
			in := find(events, "RUN_FINISHED")["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
			if in["id"] != "f1" || in["reason"] != ReasonInputRequired || in["message"] != "Which repo?" ||
				string(mustJSON(in["responseSchema"])) != `{"properties":{"repo":{"type":"string"}},"type":"object"}` {
				t.Errorf("interrupt %v", in)
			}
		},
	}, {
		name: "a sub-agent's events are attributed to it",
		events: []runner.Event{
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: &agent.ToolCall{ID: "r", Name: "research", State: agent.StateExecuting, Arguments: json.RawMessage(`{}`)}}),
			chunk(agent.Chunk{Kind: agent.KindText, Round: 1, Agent: "research/search", Depth: 2, Parent: "r/s", Text: "deep"}),
			chunk(agent.Chunk{Kind: agent.KindRoundEnd, Round: 1, Agent: "research/search", Depth: 2, Parent: "r/s"}),
			chunk(agent.Chunk{Kind: agent.KindToolCall, Round: 1, Tool: &agent.ToolCall{ID: "r", Name: "research", State: agent.StateResult, Result: "ok"}}),
			ended(runner.StatusFinished, ""),
		},
		want: "RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END SUBAGENT_STARTED SUBAGENT_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END CUSTOM STEP_FINISHED SUBAGENT_FINISHED TOOL_CALL_RESULT STEP_FINISHED SUBAGENT_FINISHED RUN_FINISHED",
		check: func(t *testing.T, events []map[string]any) {
			var starts []map[string]any
			for _, e := range events {
				if e["type"] == "SUBAGENT_STARTED" {
					starts = append(starts, e)
				}
			}
			if starts[0]["subagentRunId"] != "r" || starts[0]["name"] != "research" ||
				starts[1]["subagentRunId"] != "r/s" || starts[1]["name"] != "search" || starts[1]["parentSubagentRunId"] != "r" {
				t.Errorf("starts %v", starts)
			}
			if c := find(events, "TEXT_MESSAGE_CONTENT"); c["subagentRunId"] != "r/s" || c["messageId"] != "r/s/th.3.1" {
				t.Errorf("content %v", c)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := encode(t, tt.known, tt.events...)
			if got := types(events); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, events)
			}
		})
	}
}

func TestEncoderEscapes(t *testing.T) {
	text := "a \"quote\", a \\, a\nnew line, \x01, <b>&, \u2028, \xff, 😀"
	events := encode(t, nil, chunk(agent.Chunk{Kind: agent.KindText, Round: 0, Text: text}))
	want := strings.ToValidUTF8(text, "\ufffd")
	if got := find(events, "TEXT_MESSAGE_CONTENT")["delta"]; got != want {
		t.Errorf("delta %q, want %q", got, want)
	}
}

func textEvent() runner.Event {
	return chunk(agent.Chunk{Kind: agent.KindText, Round: 1, Text: "Hello, here is the next word of the reply ", Raw: "Hello, here is the next word of the reply "})
}

// BenchmarkTextDelta is the cost of one text delta written as an AG-UI
// event, in an open message.
func BenchmarkTextDelta(b *testing.B) {
	e := NewEncoder(io.Discard, "thread-0123456789", "run-1")
	ev := textEvent()
	e.Encode(ev)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := e.Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTextDeltaJSONMarshal is what the web chat pays for the same
// delta: json.Marshal of the agent.Chunk, written as an SSE data line.
func BenchmarkTextDeltaJSONMarshal(b *testing.B) {
	ev := textEvent()
	var w io.Writer = io.Discard
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, err := json.Marshal(ev.Chunk)
		if err != nil {
			b.Fatal(err)
		}
		w.Write([]byte("data: "))
		w.Write(j)
		w.Write([]byte("\n\n"))
	}
}

func TestTextDeltaAllocs(t *testing.T) {
	e := NewEncoder(io.Discard, "thread", "run")
	ev := textEvent()
	e.Encode(ev)
	if n := testing.AllocsPerRun(100, func() { e.Encode(ev) }); n != 0 {
		t.Errorf("a text delta allocates %v times, want 0", n)
	}
}
