package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
)

// testServer is the configuration of the stdio MCP test server, with extra
// fields of the configuration file.
func testServer(t *testing.T, extra map[string]any) map[string]any {
	t.Helper()
	m := map[string]any{"command": stdioServer(t)}
	maps.Copy(m, extra)
	return m
}

// mcpFile writes a configuration file of MCP servers, by name, and returns
// its path.
func mcpFile(t *testing.T, servers map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// toolCall is a call the scripted model makes.
type toolCall struct{ name, args string }

// toolModel is a scripted model that, in every turn, plans a tool round,
// makes the calls (all in one reply), and then answers "Done.".
func toolModel(t *testing.T, calls ...toolCall) *agenttest.Server {
	t.Helper()
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	var ids atomic.Int64
	srv.Respond(func(req *agenttest.Request) agenttest.Response {
		switch {
		case !req.HasTools():
			return agenttest.Reply().Text("I will use the tools. <need_tool>").Finish("stop")
		case req.LastMessage().Role == "tool":
			return agenttest.Reply().Text("Done.").Finish("stop")
		}
		b := agenttest.Reply().Text("Calling them.")
		for i, c := range calls {
			b = b.Call(i, fmt.Sprintf("call_%d", ids.Add(1)), c.name, c.args)
		}
		return b.Finish("tool_calls")
	})
	return srv
}

// modelArgs are the flags that point the CLI at a scripted model.
func modelArgs(srv *agenttest.Server) []string {
	return []string{"-base-url", srv.URL(), "-model", "m"}
}

// partialOutput joins the partial output of a call's executing chunks.
func partialOutput(chunks []agent.Chunk, name string) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.Name == name && c.Tool.State == agent.StateExecuting {
			b.WriteString(c.Tool.PartialResult)
		}
	}
	return b.String()
}

// toolResult returns the result of the call of name.
func toolResult(t *testing.T, chunks []agent.Chunk, name string) string {
	t.Helper()
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.Name == name && c.Tool.State == agent.StateResult {
			return c.Tool.Result
		}
	}
	t.Fatalf("no result of %s in %v", name, trace(chunks))
	return ""
}

// The built CLI with -mcp: the test server's tools join the demo tools,
// -yes approves them, and the JSON log shows the progress of a call as
// executing chunks with partial_result before its result.
func TestBinaryMCPToolsWithYes(t *testing.T) {
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	model := toolModel(t,
		toolCall{"echo", `{"text":"hello from MCP"}`},
		toolCall{"progress", `{"steps":3,"delay_ms":30}`},
	)
	file := mcpFile(t, map[string]any{"mcptest": testServer(t, nil)})

	p := startCLI(ctx, t, append(modelArgs(model), "-yes", "-json", "-mcp", file, "use the tools")...)
	chunks, err := p.wait(t)
	require.NoError(t, err, "stderr: %s", p.stderr.String())
	assert.Empty(t, p.stderr.String(), "nothing on stderr without -v")

	assert.Equal(t, []string{
		"round_end:0:need_tool",
		"tool:start:echo", "tool:start:progress",
		"tool:executing:echo", "tool:result:echo",
		"tool:executing:progress", "tool:progress:progress", "tool:result:progress",
		"round_end:1", "round_end:2",
	}, structure(trace(chunks)), "no approval asked with -yes; progress as partial output")
	assert.Equal(t, "hello from MCP", toolResult(t, chunks, "echo"))
	assert.Equal(t, "progress: done 3 steps", toolResult(t, chunks, "progress"))
	assert.Equal(t, "step 1 of 3\nstep 2 of 3\nstep 3 of 3\n", partialOutput(chunks, "progress"))

	reqs := model.Requests()
	require.Len(t, reqs, 3)
	offered := reqs[1].ToolNames()
	for _, name := range []string{"get_weather", "get_time", "run_command", "show_card", "echo", "progress", "spawn", "counter"} {
		assert.Contains(t, offered, name, "the MCP tools join the demo tools")
	}
	var results []string
	for _, m := range reqs[2].Messages {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	assert.Equal(t, []string{"hello from MCP", "progress: done 3 steps"}, results, "the model reads the results")
}

// Without -yes the terminal asks about an MCP tool like any other, and a
// server or tool marked skipApproval is not asked about.
func TestMCPToolsAskForApproval(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	model := toolModel(t, toolCall{"echo", `{"text":"asked"}`}, toolCall{"counter", `{}`})
	file := mcpFile(t, map[string]any{"mcptest": testServer(t, map[string]any{"skipApprovalTools": []string{"counter"}})})

	r := runCLI(t, "y\n", append(modelArgs(model), "-json", "-mcp", file, "use the tools")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	chunks := parseChunks(t, r.stdout)
	tr := structure(trace(chunks))
	assert.Contains(t, tr, "tool:approval_required:echo")
	assert.NotContains(t, tr, "tool:approval_required:counter", "skipApprovalTools")
	assert.Equal(t, 1, strings.Count(r.stderr, "approve [y] / reject [n]"), "one question: %s", r.stderr)
	assert.Equal(t, "asked", toolResult(t, chunks, "echo"))
	assert.Equal(t, "1", toolResult(t, chunks, "counter"))
}

// -v lists the servers, their state and their tools by the names the model
// knows them by: a demo tool keeps its name and the MCP tool of that name
// is offered as <server>__<tool>.
func TestMCPServersListedWithVerbose(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	clock := server.NewMCPServer("clock", "1.0.0")
	clock.AddTool(mcp.NewTool("get_time", mcp.WithDescription("The time, on another clock.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("teatime"), nil
		})
	ts := servertest.NewTestStreamableHTTPServer(clock) // 127.0.0.1
	t.Cleanup(ts.Close)
	model := toolModel(t, toolCall{"clock__get_time", `{}`})
	file := mcpFile(t, map[string]any{
		"clock":   map[string]any{"url": ts.URL + "/mcp"},
		"sandbox": testServer(t, map[string]any{"isolation": "per_conversation", "disabledTools": []string{"hang", "crash", "flood", "freeze", "add_tool", "spawn", "image", "audio", "resources", "fail", "slow", "env", "cwd", "pid", "cancelled"}}),
	})

	r := runCLI(t, "", append(modelArgs(model), "-v", "-yes", "-json", "-mcp", file, "what time is it?")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "cli: MCP server clock (http, shared): connected; tools: clock__get_time\n")
	assert.Contains(t, r.stderr, "cli: MCP server sandbox (stdio, per_conversation): on_demand; tools: counter, echo, progress\n")
	assert.Contains(t, r.stderr, `msg="server connected"`, "the MCP client logs with -v")
	chunks := parseChunks(t, r.stdout)
	assert.Equal(t, "teatime", toolResult(t, chunks, "clock__get_time"))
	offered := model.Requests()[1].ToolNames()
	assert.Contains(t, offered, "get_time", "the demo tool keeps its name")
	assert.Contains(t, offered, "clock__get_time")
}

// A per_conversation server works in a CLI without -db: the process's one
// conversation gets an instance, which its later turns reuse; with -db each
// -session is a conversation of its own.
func TestMCPPerConversationServer(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	model := toolModel(t, toolCall{"counter", `{}`})
	file := mcpFile(t, map[string]any{"sandbox": testServer(t, map[string]any{"isolation": "per_conversation", "skipApproval": true})})

	// The prompt loop: two turns, one instance.
	r := runCLI(t, "count\ncount again\n", append(modelArgs(model), "-json", "-mcp", file)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	var counts []string
	for _, c := range parseChunks(t, r.stdout) {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			counts = append(counts, c.Tool.Result)
		}
	}
	assert.Equal(t, []string{"1", "2"}, counts, "the conversation's own instance, kept between turns")

	db := filepath.Join(t.TempDir(), "chat.db")
	r = runCLI(t, "", append(modelArgs(model), "-json", "-mcp", file, "-db", db, "-session", "s1", "count")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "1", toolResult(t, parseChunks(t, r.stdout), "counter"))
}

// A server that cannot start is an error, which names the server and holds
// no secret from the environment.
func TestMCPServerThatCannotStart(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	const secret = "s3cret-mode-value-1234"
	t.Setenv("CLI_TEST_MODE", secret)
	file := mcpFile(t, map[string]any{"broken": map[string]any{"command": stdioServer(t), "args": []string{"-mode=${CLI_TEST_MODE}"}}})

	r := runCLI(t, "", "-yes", "-json", "-mcp", file, helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "cli: -mcp "+file+": ")
	assert.Contains(t, r.stderr, `"broken"`)
	assert.Contains(t, r.stderr, "[redacted]", "the server's last words, without the secret: %s", r.stderr)
	assert.NotContains(t, r.stderr, secret)

	r = runCLI(t, "", "-yes", "-json", "-mcp", filepath.Join(t.TempDir(), "missing.json"), helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "missing.json")
}

// An MCP call interrupted while it runs keeps the progress it reported,
// shown live as output lines like run_command's; the CLI's end ends the
// server and the child it started.
func TestMCPProgressShownLiveAndKeptWhenInterrupted(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	model := toolModel(t, toolCall{"spawn", `{"block":true}`})
	file := mcpFile(t, map[string]any{"mcptest": testServer(t, nil)})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Cancelling the run's context is what Ctrl-C does.
	out := &signalWriter{marker: "  │ child pid ", fn: cancel}
	var errb bytes.Buffer
	code := run(ctx, append(modelArgs(model), "-yes", "-mcp", file, "spawn a child"), strings.NewReader(""), out, &errb)
	require.Equal(t, exitInterrupted, code, "stderr: %s", errb.String())
	stdout := out.String()
	assert.Contains(t, stdout, "⏺ spawn {\"block\":true}\n")
	i := strings.Index(stdout, "  │ child pid ")
	j := strings.Index(stdout, "  ✗ rejected: "+agent.CauseInterrupted.DefaultReason()+"\n")
	require.True(t, i >= 0 && j > i, "the progress line before the interruption:\n%s", stdout)

	line := stdout[i+len("  │ child pid "):]
	pid, err := strconv.Atoi(line[:strings.IndexByte(line, '\n')])
	require.NoError(t, err, "stdout:\n%s", stdout)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // after a failure
	gone(t, pid, "the child of the MCP server")
}

// The interrupter ends the MCP servers before a second Ctrl-C exits.
func TestSecondCtrlCEndsMCPServersFirst(t *testing.T) {
	leaktest.Check(t)
	var order []string
	exited := make(chan int, 1)
	defer func(old func(int)) { exit = old }(exit)
	exit = func(code int) {
		order = append(order, "exit")
		exited <- code
	}
	var errb signalWriter
	i := newInterrupter(&errb, func() { order = append(order, "close MCP") })
	defer i.stop()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	i.arm(cancel, "interrupting")
	i.sigs <- os.Interrupt
	<-ctx.Done()
	i.sigs <- os.Interrupt
	select {
	case code := <-exited:
		assert.Equal(t, 130, code)
	case <-time.After(10 * time.Second):
		t.Fatal("the second Ctrl-C did not exit")
	}
	assert.Equal(t, []string{"close MCP", "exit"}, order)
}

// The built CLI ends its MCP servers, and what they started, however it
// ends: at the end of its input, at Ctrl-C during a call or at the prompt,
// and at SIGTERM or SIGHUP.
func TestBinaryEndsMCPServers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process checks read /proc")
	}
	noModelEnv(t)
	for _, tc := range []struct {
		name   string
		loop   bool           // the prompt loop, else a prompt argument
		block  bool           // the call still runs when the CLI is told to end
		signal syscall.Signal // 0: stdin is closed
		status int
	}{
		{name: "end of input", loop: true},
		{name: "Ctrl-C during the call", block: true, signal: syscall.SIGINT, status: exitInterrupted},
		{name: "Ctrl-C at the prompt", loop: true, signal: syscall.SIGINT},
		{name: "SIGTERM during the call", block: true, signal: syscall.SIGTERM, status: 128 + int(syscall.SIGTERM)},
		{name: "SIGHUP at the prompt", loop: true, signal: syscall.SIGHUP, status: 128 + int(syscall.SIGHUP)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buildCLI(t) // before the deadline starts: the first build may take long
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			model := toolModel(t, toolCall{"pid", `{}`}, toolCall{"spawn", fmt.Sprintf(`{"block":%t}`, tc.block)})
			file := mcpFile(t, map[string]any{"mcptest": testServer(t, nil)})
			args := append(modelArgs(model), "-yes", "-json", "-mcp", file)
			if !tc.loop {
				args = append(args, "spawn a child")
			}
			p := startCLI(ctx, t, args...)
			if tc.loop {
				_, err := p.stdin.Write([]byte("spawn a child\n"))
				require.NoError(t, err)
			}

			server, err := strconv.Atoi(p.await(ctx, t, "the pid result", isState("pid", agent.StateResult)).Tool.Result)
			require.NoError(t, err)
			var child int
			if tc.block {
				c := p.await(ctx, t, "the child's pid as progress", func(c agent.Chunk) bool {
					return isState("spawn", agent.StateExecuting)(c) && c.Tool.PartialResult != ""
				})
				child, err = strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(c.Tool.PartialResult), "child pid "))
			} else {
				child, err = strconv.Atoi(p.await(ctx, t, "the spawn result", isState("spawn", agent.StateResult)).Tool.Result)
				p.await(ctx, t, "the end of the turn", func(c agent.Chunk) bool { return c.Kind == agent.KindRoundEnd && c.Round == 2 })
			}
			require.NoError(t, err)
			require.True(t, alive(server) && alive(child), "the server and its child run")
			t.Cleanup(func() {
				// After a failure: nothing of the test lives on.
				_ = syscall.Kill(child, syscall.SIGKILL)
				_ = syscall.Kill(server, syscall.SIGKILL)
			})
			if tc.loop {
				// The prompt is on stderr once the turn has ended.
				for strings.Count(p.stderr.String(), "› ") < 2 {
					require.NoError(t, ctx.Err(), "no second prompt; stderr: %s", p.stderr.String())
					time.Sleep(10 * time.Millisecond)
				}
			}

			if tc.signal == 0 {
				require.NoError(t, p.stdin.Close())
			} else {
				require.NoError(t, p.cmd.Process.Signal(tc.signal))
			}
			chunks, err := p.wait(t)
			require.NoError(t, ctx.Err(), "the CLI did not end; stderr: %s", p.stderr.String())
			assert.Equal(t, tc.status, p.cmd.ProcessState.ExitCode(), "err %v; stderr: %s", err, p.stderr.String())
			if tc.block {
				tr := trace(chunks)
				assert.Equal(t, []string{"rejected:spawn:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
			}
			gone(t, server, "the MCP server")
			gone(t, child, "the MCP server's child")
		})
	}
}

// The sample configuration file in the web chat's manual (docs/webchat.md,
// which this CLI's manual points to) is one mcpclient reads.
func TestREADMEMCPSample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "webchat.md"))
	require.NoError(t, err)
	const start = "```json\n{\n  \"mcpServers\""
	i := strings.Index(string(readme), start)
	require.GreaterOrEqual(t, i, 0, "no sample MCP configuration in docs/webchat.md")
	sample := string(readme[i+len("```json\n"):])
	sample = sample[:strings.Index(sample, "```")]
	servers, err := mcpclient.ParseConfig([]byte(sample))
	require.NoError(t, err, "the sample of docs/webchat.md:\n%s", sample)
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"everything", "files"}, names, "the disabled server is left out")
	assert.Equal(t, mcpclient.IsolationPerConversation, servers[0].Isolation)
	assert.Equal(t, 2*time.Minute, servers[0].CallTimeout)
	assert.Equal(t, []string{"read_text_file", "list_directory"}, servers[1].SkipApprovalTools)
}
