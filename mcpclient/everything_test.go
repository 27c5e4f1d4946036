package mcpclient

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest"
	"github.com/planround/planround/memory"
)

// The tests in this file run the third-party reference server
// @modelcontextprotocol/server-everything (the version pinned in
// testdata/npm) through the client, over each transport. They skip when
// Node.js or the package is missing, and fail then under
// PLANROUND_REQUIRE_ALL=1.

// everythingTools are the tools server-everything lists to this client,
// which declares the elicitation capability, in its order: those it registers at once, then the two
// that ask for input, and simulate-research-query, which it registers
// when the client says it is initialized (before it reads the next
// request).
var everythingTools = []string{
	"echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
	"get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
	"toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
	"trigger-elicitation-request", "trigger-url-elicitation",
	"simulate-research-query",
}

// everythingConfig starts server-everything on the transport (over HTTP a
// process on 127.0.0.1 that ends with t; over stdio the command the client
// starts) and returns its configuration.
func everythingConfig(t *testing.T, tr Transport) ServerConfig {
	t.Helper()
	cfg := ServerConfig{Name: "everything", Transport: tr, StartTimeout: 30 * time.Second}
	switch tr {
	case TransportStdio:
		cfg.Command, cfg.Args = mcptest.EverythingStdio(t)
	case TransportSSE:
		cfg.URL = mcptest.EverythingHTTP(t, "sse")
	case TransportHTTP:
		cfg.URL = mcptest.EverythingHTTP(t, "streamableHttp")
	}
	return cfg
}

func closeIdleHTTP() { http.DefaultTransport.(*http.Transport).CloseIdleConnections() }

// Through the client, over stdio, SSE and streamable HTTP: every tool is
// discovered; text passes through; an image becomes a placeholder;
// resource links and references become short text; arguments the server
// refuses come back as an error for the model; progress becomes partial
// output.
func TestEverythingTools(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			c := newClient(t, Options{}, everythingConfig(t, tr))

			var names []string
			for _, tl := range c.Tools() {
				names = append(names, tl.Definition().Name)
			}
			if !slices.Equal(names, everythingTools) {
				t.Errorf("tools = %v, want %v", names, everythingTools)
			}
			if st := c.Servers()[0]; st.State != StateConnected || !slices.Equal(st.Tools, everythingTools) {
				t.Errorf("status = %+v, want connected with every tool", st)
			}

			if got, err := run(t, tool(t, c, "echo"), `{"message":"hello, everything"}`, nil); err != nil || got != "Echo: hello, everything" {
				t.Errorf("echo = %q, %v", got, err)
			}

			got, err := run(t, tool(t, c, "get-tiny-image"), `{}`, nil)
			want := "Here's the image you requested:\n[image captured, mimeType=image/png]\nThe image above is the MCP logo."
			if err != nil || got != want {
				t.Errorf("get-tiny-image = %q, %v; want %q", got, err, want)
			}

			// A tool with an output schema: its structured content, checked
			// against the schema, as compact JSON (keys as the server sent
			// them).
			got, err = run(t, tool(t, c, "get-structured-content"), `{"location":"Chicago"}`, nil)
			if err != nil || got != `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}` {
				t.Errorf("get-structured-content = %q, %v; want the structured content as JSON", got, err)
			}

			got, err = run(t, tool(t, c, "get-resource-links"), `{"count":2}`, nil)
			if err != nil || !strings.HasPrefix(got, "Here are 2 resource links") ||
				!strings.Contains(got, "\n[resource link: demo://resource/dynamic/blob/1 (Blob Resource 1), mimeType=text/plain: Resource 1: plaintext resource]") ||
				!strings.Contains(got, "\n[resource link: demo://resource/dynamic/text/2 (Text Resource 2)") ||
				strings.Count(got, "\n") != 2 {
				t.Errorf("get-resource-links = %q, %v; want the text and a line per link", got, err)
			}

			got, err = run(t, tool(t, c, "get-resource-reference"), `{"resourceType":"Blob","resourceId":2}`, nil)
			// The blob says when it was made, in the server's locale:
			// "9:59:08 PM" or "10:00:00 PM", so 55 or 56 bytes.
			if err != nil || !blobLine.MatchString(got) || len(got) > 300 {
				t.Errorf("get-resource-reference (blob) = %q, %v; want a short line in place of the blob", got, err)
			}
			got, err = run(t, tool(t, c, "get-resource-reference"), `{"resourceType":"Text","resourceId":1}`, nil)
			if err != nil || !strings.Contains(got, "\n[resource demo://resource/dynamic/text/1]\nResource 1: This is a plaintext resource") {
				t.Errorf("get-resource-reference (text) = %q, %v; want the resource's text", got, err)
			}

			if got, err := run(t, tool(t, c, "get-sum"), `{"a":2,"b":3}`, nil); err != nil || got != "The sum of 2 and 3 is 5." {
				t.Errorf("get-sum = %q, %v", got, err)
			}
			// The agent checks arguments against the schema before a call;
			// here the tool is called directly, so the server's own check
			// answers, with an error result.
			got, err = run(t, tool(t, c, "get-sum"), `{"a":"two"}`, nil)
			if got != "" || err == nil || !strings.Contains(err.Error(), "Input validation error") || !strings.Contains(err.Error(), "get-sum") {
				t.Errorf("get-sum with bad arguments = %q, %v; want the server's error result", got, err)
			}

			var p buffer
			got, err = run(t, tool(t, c, "trigger-long-running-operation"), `{"duration":0.3,"steps":3}`, &p)
			if err != nil || got != "Long running operation completed. Duration: 0.3 seconds, Steps: 3." {
				t.Errorf("trigger-long-running-operation = %q, %v", got, err)
			}
			if out := p.String(); out != "step 1/3\nstep 2/3\nstep 3/3\n" {
				t.Errorf("progress = %q, want a line per step", out)
			}
		})
	}
}

// A whole agent run on server-everything, over each transport: the model
// calls echo, the approver is asked, the result reaches the model; in a
// second run the model calls the long-running operation, its progress shows
// as executing chunks, and an interrupt in the middle ends the run at once
// with the progress so far, long before the operation would have ended.
func TestEverythingAgentRun(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			c := newClient(t, Options{}, everythingConfig(t, tr))
			model := agenttest.NewServer()
			t.Cleanup(model.Close)
			approver := &askingApprover{}
			a := newAgent(t, c, model, approver)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			model.Enqueue(
				agenttest.Reply().Call(0, "call_1", "echo", `{"message":"from the model"}`).Finish("tool_calls"),
				agenttest.Reply().Text("It echoed.").Finish("stop"),
			)
			turn := a.NewTurn(agent.Input{Message: "echo something"})
			var states []agent.ToolState
			var result string
			for ch, err := range turn.Run(ctx) {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if ch.Kind == agent.KindToolCall {
					states = append(states, ch.Tool.State)
					result = ch.Tool.Result
				}
			}
			want := []agent.ToolState{agent.StateStart, agent.StateApprovalRequired, agent.StateExecuting, agent.StateResult}
			if states = slices.Compact(states); !slices.Equal(states, want) {
				t.Errorf("states = %v, want %v", states, want)
			}
			if result != "Echo: from the model" {
				t.Errorf("result = %q", result)
			}
			if got := approver.names(); !slices.Equal(got, []string{"echo"}) {
				t.Errorf("the approver was asked about %v, want [echo]", got)
			}
			reqs := model.Requests()
			if msg := reqs[len(reqs)-1].LastMessage(); msg.Role != "tool" || msg.Content != "Echo: from the model" {
				t.Errorf("the model read %+v, want the tool's result", msg)
			}
			if offered := reqs[0].ToolNames(); !slices.Equal(offered, everythingTools) {
				t.Errorf("offered tools %v, want %v", offered, everythingTools)
			}
			validTurn(t, turn.Messages())

			// The operation takes a minute, a step each half second.
			model.Enqueue(agenttest.Reply().Call(0, "call_2", "trigger-long-running-operation", `{"duration":60,"steps":120}`).Finish("tool_calls"))
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			turn = a.NewTurn(agent.Input{Message: "run the operation"})
			var partial string
			var rejected *agent.ToolCall
			var last agent.Chunk
			var stopped time.Time
			for ch, err := range turn.Run(runCtx) {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				last = ch
				if ch.Kind == agent.KindToolCall && ch.Tool.State == agent.StateExecuting {
					partial += ch.Tool.PartialResult
					if stopped.IsZero() && strings.Contains(partial, "step 2/120\n") {
						stopped = time.Now()
						stop()
					}
				}
				if ch.Kind == agent.KindToolRejected {
					rejected = ch.Tool
				}
			}
			if stopped.IsZero() {
				t.Fatalf("the run ended before the second step: %+v", last)
			}
			// A bound, not a speed: the operation itself would run on for
			// most of a minute.
			if waited := time.Since(stopped); waited > 15*time.Second {
				t.Errorf("the run ended %v after the interrupt", waited)
			}
			if last.Kind != agent.KindInterrupted {
				t.Errorf("last chunk = %+v, want interrupted", last)
			}
			if rejected == nil || rejected.Cause != agent.CauseInterrupted || !strings.HasPrefix(rejected.PartialResult, "step 1/120\nstep 2/120\n") {
				t.Errorf("rejected call = %+v, want interrupted with the progress so far", rejected)
			}
			msgs := turn.Messages()
			validTurn(t, msgs)
			if tm := msgs[len(msgs)-1]; tm.Role != memory.RoleTool || !strings.Contains(tm.Content, "step 2/120") {
				t.Errorf("the history ends with %+v, want the call's tool message with its progress", tm)
			}

			// The server still answers.
			if got, err := run(t, tool(t, c, "echo"), `{"message":"still here"}`, nil); err != nil || got != "Echo: still here" {
				t.Errorf("echo after the interrupt = %q, %v", got, err)
			}
		})
	}
}

// validTurn checks that a turn's messages are valid history: a store takes
// them, every tool call is answered by a tool message right after its
// assistant message, and no tool message is an orphan.
func validTurn(t *testing.T, msgs []memory.Message) {
	t.Helper()
	if err := memory.ValidateMessages(msgs); err != nil {
		t.Errorf("invalid history: %v", err)
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == memory.RoleTool {
			t.Errorf("message %d: tool message %q without a preceding call", i, m.ToolCallID)
			continue
		}
		if m.Role != memory.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		for i+1 < len(msgs) && msgs[i+1].Role == memory.RoleTool {
			i++
			if !want[msgs[i].ToolCallID] {
				t.Errorf("message %d: tool message for unknown call %q", i, msgs[i].ToolCallID)
			}
			delete(want, msgs[i].ToolCallID)
		}
		if len(want) > 0 {
			t.Errorf("message %d: calls without a tool message: %v", i, want)
		}
	}
}

// blobLine is the line that stands for the everything server's blob
// resource 2 in a tool's result.
var blobLine = regexp.MustCompile(`\n\[resource demo://resource/dynamic/blob/2, mimeType=text/plain, 5[56] bytes\]\n`)
