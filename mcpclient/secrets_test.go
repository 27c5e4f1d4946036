package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
	"github.com/planround/planround/memory"
)

// A token from the environment reaches the server in a header, and never
// shows in results, errors, statuses, chunks or logs.
func TestSecretsReachTheServerOnly(t *testing.T) {
	leaktest.Check(t)
	const token = "tok-9f8e7d6c5b4a"
	t.Setenv("PLANROUND_TEST_TOKEN", token)

	release := make(chan struct{})
	mcpHandler := server.NewStreamableHTTPServer(testserver.New(testserver.Options{Release: release}))
	var mu sync.Mutex
	var auth []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	stop := sync.OnceFunc(func() {
		close(release)
		ts.CloseClientConnections()
		ts.Close()
	})
	t.Cleanup(stop)

	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))

	c := newClient(t, Options{Logger: logger}, ServerConfig{
		Name:    "vault",
		URL:     ts.URL + "/mcp?key=${PLANROUND_TEST_TOKEN}",
		Headers: map[string]string{"Authorization": "Bearer ${PLANROUND_TEST_TOKEN}"},
	})
	mu.Lock()
	if len(auth) == 0 || auth[0] != "Bearer "+token {
		t.Errorf("the server got Authorization %q, want the expanded token", auth)
	}
	mu.Unlock()

	var shown []string
	// A server that echoes the secret (as a get-env tool would): the
	// chunk's result does not show it. (The arguments are the model's own
	// words.)
	got := callAs(t, c, "s", "echo", `{"text":"the token is `+token+`"}`)
	got.Arguments = nil
	chunk, _ := json.Marshal(got)
	shown = append(shown, string(chunk))
	if got.Result != "the token is [redacted]" {
		t.Errorf("result %q, want the token redacted", got.Result)
	}

	stop()
	_, err := run(t, tool(t, c, "echo"), `{"text":"x"}`, nil)
	if err == nil {
		t.Fatal("a call on a stopped server succeeded")
	}
	shown = append(shown, err.Error())
	_, err = run(t, tool(t, c, "echo"), `{"text":"x"}`, nil) // down: the retry's error
	shown = append(shown, err.Error())
	status, _ := json.Marshal(c.Servers())
	shown = append(shown, string(status))
	logMu.Lock()
	shown = append(shown, logs.String())
	logMu.Unlock()

	for _, s := range shown {
		if strings.Contains(s, token) {
			t.Errorf("the token shows in:\n%s", s)
		}
	}
	// The transport's error quotes the URL, which holds the token.
	if !strings.Contains(shown[1], "key=[redacted]") {
		t.Errorf("the error after the stop: %s; want the URL with its key redacted", shown[1])
	}
}

// The token of the tests below, from the environment.
const testToken = "tok-9f8e7d6c5b4a"

// vaultServer is an MCP server built from its configuration, as some are:
// its tools' definitions mention the token (testToken) the client sends it,
// in descriptions, titles, enum values, defaults, examples, nested
// properties, definitions, and in the names of a tool and of a property.
//
//   - lookup {query, mode, options {depth}, ref, <token>_id}: answers
//     "query=<query> id=<the <token>_id argument>".
//   - fetch_<token>: answers "fetched".
//   - titled: no description, a title with the token; answers "titled".
//   - clash {<token>, <token>-extra}: two property names that read the same
//     once redacted (see vaultConfig's secrets).
//   - parts {parts, delay_ms, hold}: sends each part as the message of a
//     progress notification, waiting delay_ms after each, then answers
//     "parts: done", or with hold waits until it is cancelled.
//   - add: adds the tool late, whose description has the token, and says
//     that the list changed.
func vaultServer(token string) *server.MCPServer {
	srv := server.NewMCPServer("vault", "1.0.0", server.WithToolCapabilities(true), server.WithRecovery())
	schema := `{"type": "object",
		"properties": {
			"query": {"type": "string", "description": "what to look up (with the key TOKEN)"},
			"mode": {"type": "string", "enum": ["fast", "TOKEN"], "default": "TOKEN", "examples": ["TOKEN"], "title": "mode TOKEN"},
			"options": {"type": "object", "properties": {"depth": {"type": "integer", "description": "how deep TOKEN goes"}}},
			"ref": {"$ref": "#/$defs/thing"},
			"TOKEN_id": {"type": "string"}
		},
		"$defs": {"thing": {"type": "string", "description": "a thing of TOKEN"}},
		"required": ["query"]}`
	srv.AddTool(mcp.NewToolWithRawSchema("lookup", "Looks things up with the key "+token+".",
		json.RawMessage(strings.ReplaceAll(schema, "TOKEN", token))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("query=" + req.GetString("query", "") + " id=" + req.GetString(token+"_id", "")), nil
		})
	srv.AddTool(mcp.NewTool("fetch_"+token, mcp.WithDescription("Fetches.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("fetched"), nil
		})
	titled := mcp.NewTool("titled", mcp.WithTitleAnnotation("Vault of "+token))
	titled.Title = "Vault " + token
	srv.AddTool(titled, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("titled"), nil
	})
	srv.AddTool(mcp.NewToolWithRawSchema("clash", "Clashes.", json.RawMessage(
		`{"type": "object", "properties": {"`+token+`": {"type": "string"}, "`+token+`-extra": {"type": "string"}}}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("clash"), nil
		})
	srv.AddTool(mcp.NewTool("parts", mcp.WithDescription("Sends its parts as progress messages."),
		mcp.WithArray("parts", mcp.WithStringItems()), mcp.WithNumber("delay_ms"), mcp.WithBoolean("hold")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			delay := time.Duration(req.GetInt("delay_ms", 0)) * time.Millisecond
			for i, part := range req.GetStringSlice("parts", nil) {
				if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
					_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress),
						map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i + 1, "message": part})
				}
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if req.GetBool("hold", false) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return mcp.NewToolResultText("parts: done"), nil
		})
	srv.AddTool(mcp.NewTool("add", mcp.WithDescription("Adds the tool late.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			server.ServerFromContext(ctx).AddTool(mcp.NewTool("late", mcp.WithDescription("Added late, knowing "+token+".")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("late"), nil
				})
			return mcp.NewToolResultText("added"), nil
		})
	return srv
}

// vaultConfig serves vaultServer in the test's process, over streamable
// HTTP or SSE, and configures it with the token from the environment, in
// two headers: so "Bearer <token>", the token and "<token>-extra" are
// secrets.
func vaultConfig(t *testing.T, tr Transport) ServerConfig {
	t.Helper()
	t.Setenv("PLANROUND_TEST_TOKEN", testToken)
	var ts *httptest.Server
	url := ""
	if tr == TransportSSE {
		ts = servertest.NewTestServer(vaultServer(testToken))
		url = ts.URL + "/sse"
	} else {
		ts = servertest.NewTestStreamableHTTPServer(vaultServer(testToken))
		url = ts.URL + "/mcp"
	}
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ServerConfig{
		Name:      "vault",
		Transport: tr,
		URL:       url,
		Headers: map[string]string{
			"Authorization": "Bearer ${PLANROUND_TEST_TOKEN}",
			"X-Api-Key":     "${PLANROUND_TEST_TOKEN}-extra",
		},
		StartTimeout: 10 * time.Second,
	}
}

// noToken fails t when the token shows in s, which it names with what.
func noToken(t *testing.T, what string, s string) {
	t.Helper()
	if strings.Contains(s, testToken) {
		t.Errorf("the token shows in %s:\n%s", what, s)
	}
}

// A server whose tool definitions mention a secret of its configuration:
// the model's requests never hold it, whether the server is shared or runs
// one instance per conversation (whose definitions come from the probe),
// nor the chunks or the stored history; the tool whose name held it and the
// property whose name held it are called as the server knows them.
func TestSecretsNotInToolDefinitions(t *testing.T) {
	for _, iso := range []Isolation{IsolationShared, IsolationPerConversation} {
		t.Run(string(iso), func(t *testing.T) {
			leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			cfg := vaultConfig(t, TransportHTTP)
			cfg.Isolation = iso
			var logs strings.Builder
			var logMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
				logMu.Lock()
				defer logMu.Unlock()
				return logs.Write(p)
			}), nil))
			c := newClient(t, Options{Logger: logger}, cfg)

			model := agenttest.NewServer()
			t.Cleanup(model.Close)
			model.Enqueue(
				agenttest.Reply().Call(0, "call_1", "lookup", `{"query":"q","[redacted]_id":"42","mode":"fast"}`).Finish("tool_calls"),
				agenttest.Reply().Call(0, "call_2", "fetch__redacted_", `{}`).Finish("tool_calls"),
				agenttest.Reply().Text("Done.").Finish("stop"),
			)
			reg, err := agent.NewToolRegistry()
			require.NoError(t, err)
			require.NoError(t, c.Register(reg))
			store := &memory.MemStore{}
			a, err := agent.New(agent.Config{
				BaseURL:         model.URL(),
				HTTPClient:      model.Client(),
				Model:           "any",
				Tools:           reg,
				Store:           store,
				Approver:        &askingApprover{},
				DisablePlanning: true,
			})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			chunks := collect(t, a, ctx, agent.Input{SessionID: "s1", Message: "look it up"})

			reqs := model.Requests()
			require.Len(t, reqs, 3)
			for i, req := range reqs {
				noToken(t, "model request "+itoa(i), string(req.Raw))
			}
			offered := reqs[0].ToolNames()
			for _, want := range []string{"lookup", "fetch__redacted_", "titled", "parts"} {
				assert.Contains(t, offered, want)
			}
			assert.NotContains(t, offered, "clash", "a tool whose property names clash once redacted is not offered")
			// The secrets were there, and are redacted.
			for _, tl := range reqs[0].Tools {
				switch tl.Name {
				case "lookup":
					assert.Equal(t, "Looks things up with the key [redacted].", tl.Description)
					var params map[string]any
					require.NoError(t, json.Unmarshal(tl.Parameters, &params))
					props, _ := params["properties"].(map[string]any)
					assert.Contains(t, props, "[redacted]_id")
					assert.Equal(t, map[string]any{"type": "string", "enum": []any{"fast", "[redacted]"}, "default": "[redacted]",
						"examples": []any{"[redacted]"}, "title": "mode [redacted]"}, props["mode"])
					assert.Contains(t, string(tl.Parameters), "how deep [redacted] goes")
					assert.Contains(t, string(tl.Parameters), "a thing of [redacted]")
				case "titled":
					assert.Equal(t, "Vault [redacted]", tl.Description)
				}
			}

			var results []string
			for _, tc := range toolChunks(chunks) {
				if tc.State == agent.StateResult {
					results = append(results, tc.Name+": "+tc.Result)
				}
			}
			assert.Equal(t, []string{"lookup: query=q id=42", "fetch__redacted_: fetched"}, results,
				"the server gets the names it knows")
			all, _ := json.Marshal(chunks)
			noToken(t, "the chunks", string(all))
			history, err := store.Messages(ctx, "s1", true)
			require.NoError(t, err)
			stored, _ := json.Marshal(history)
			noToken(t, "the stored history", string(stored))
			status, _ := json.Marshal(c.Servers())
			noToken(t, "the servers' status", string(status))
			logMu.Lock()
			defer logMu.Unlock()
			noToken(t, "the logs", logs.String())
			assert.Contains(t, logs.String(), "this tool is not offered", "the clash is logged")
		})
	}
}

// A sub-agent that borrows a server's tools offers them to its model with
// the secrets redacted too.
func TestSecretsNotInBorrowedToolDefinitions(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := newClient(t, Options{}, vaultConfig(t, TransportHTTP))
	var mu sync.Mutex
	var bodies []string
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		mu.Lock()
		bodies = append(bodies, req.Model+": "+string(req.Raw))
		mu.Unlock()
		done := false
		for _, m := range req.Messages {
			done = done || m.Role == "tool"
		}
		switch {
		case done:
			return agenttest.Reply().Text("ok").Finish("stop")
		case req.Model == "helper":
			return agenttest.Reply().Call(0, "call_1", "lookup", `{"query":"q","[redacted]_id":"7"}`).Finish("tool_calls")
		}
		return agenttest.Reply().Call(0, "call_1", "helper", `{"task":"look it up"}`).Finish("tool_calls")
	})
	base := agent.Config{
		BaseURL:         "http://model.invalid/v1",
		HTTPClient:      &http.Client{Transport: model},
		DisablePlanning: true,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	}
	host, err := agent.NewToolRegistry()
	require.NoError(t, err)
	require.NoError(t, c.Register(host))
	sub := base
	sub.Model = "helper"
	sub.Tools, err = host.Subset("lookup", "fetch__redacted_")
	require.NoError(t, err)
	helper, err := agent.NewSubAgent("helper", "Looks things up.", sub)
	require.NoError(t, err)
	base.Tools, err = agent.NewToolRegistry(helper)
	require.NoError(t, err)
	base.Model = "host"
	a, err := agent.New(base)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chunks := collect(t, a, ctx, agent.Input{Message: "ask the helper"})
	var got string
	for _, ch := range chunks {
		if ch.Depth == 1 && ch.Tool != nil && ch.Tool.State == agent.StateResult {
			got = ch.Tool.Result
		}
	}
	assert.Equal(t, "query=q id=7", got)
	mu.Lock()
	defer mu.Unlock()
	helperAsked := false
	for _, b := range bodies {
		helperAsked = helperAsked || strings.HasPrefix(b, "helper: ")
		noToken(t, "a model request", b)
	}
	assert.True(t, helperAsked, "the helper's model was asked")
	all, _ := json.Marshal(chunks)
	noToken(t, "the chunks", string(all))
}

// The tools a shared server lists after it said its list changed are
// redacted too. (Over SSE, where a server says so unasked: over streamable
// HTTP at protocol 2026-07-28 the client's subscription to changes opens
// in the background, and may miss a change made right after the start.)
func TestSecretsNotInChangedToolList(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := newClient(t, Options{}, vaultConfig(t, TransportSSE))
	if _, err := run(t, tool(t, c, "add"), `{}`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new tool is listed", func() bool {
		return slices.Contains(c.Servers()[0].Tools, "late")
	})
	assert.Equal(t, "Added late, knowing [redacted].", listed(t, c, "late").desc) // as a person is shown it
	for _, tl := range c.Tools() {
		def, _ := json.Marshal(tl.Definition())
		noToken(t, "a tool's definition", string(def))
	}
}

// partsArgs are the arguments of vaultServer's parts tool.
func partsArgs(t *testing.T, parts []string, delayMS int, hold bool) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"parts": parts, "delay_ms": delayMS, "hold": hold})
	require.NoError(t, err)
	return string(b)
}

// A secret split between progress notifications, at every offset between
// two and between three of them, shows as one "[redacted]": a line break
// that falls in it comes after it.
func TestSecretSplitBetweenProgressNotifications(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := newClient(t, Options{}, vaultConfig(t, TransportHTTP))
	parts := tool(t, c, "parts")
	s := testToken

	// Batches of at most 60 notifications: an mcp-go server drops what
	// overflows its queue of 100.
	type batch struct {
		parts []string
		want  string
	}
	var batches []batch
	two := batch{}
	for k := 1; k < len(s); k++ {
		two.parts = append(two.parts, s[:k], s[k:])
		two.want += "[redacted]\n\n"
	}
	batches = append(batches, two)
	var three batch
	for i := 1; i < len(s); i++ {
		for j := i + 1; j < len(s); j++ {
			three.parts = append(three.parts, s[:i], s[i:j], s[j:])
			three.want += "[redacted]\n\n\n"
			if len(three.parts) >= 60 {
				batches = append(batches, three)
				three = batch{}
			}
		}
	}
	batches = append(batches, three)

	for i, b := range batches {
		// The server holds the call after its parts; "end" shows that
		// they all came, and the run's end passes on what is held back.
		b.parts = append(b.parts, "end")
		b.want += "end\n"
		progress := &buffer{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		done := make(chan error, 1)
		go func() {
			_, err := parts.Execute(ctx, []byte(partsArgs(t, b.parts, 1, true)), progress)
			done <- err
		}()
		waitFor(t, "the parts of batch "+itoa(i)+" came", func() bool { return strings.HasSuffix(progress.String(), "end\n") })
		cancel()
		<-done
		if got := progress.String(); got != b.want {
			t.Errorf("batch %d: partial output\n%q\nwant\n%q", i, got, b.want)
		}
	}
}

// The end of a call's partial output that is held back (it may be the
// beginning of a longer secret) is passed on, redacted, when the call
// ends: with its result, and when the run is interrupted, where the agent
// attaches the partial output to the rejected call and stores it.
func TestProgressHeldBackUntilTheCallEnds(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := newClient(t, Options{}, vaultConfig(t, TransportHTTP))

	t.Run("result", func(t *testing.T) {
		// The token may begin "<token>-extra": held back until the end.
		progress := &buffer{}
		got, err := run(t, tool(t, c, "parts"), partsArgs(t, []string{"x " + testToken}, 20, false), progress)
		require.NoError(t, err)
		assert.Equal(t, "parts: done", got)
		assert.Equal(t, "x [redacted]\n", progress.String())
	})

	t.Run("interrupted", func(t *testing.T) {
		model := agenttest.NewServer()
		t.Cleanup(model.Close)
		split := []string{"the key is " + testToken[:8], testToken[8:] + " and again " + testToken}
		model.Enqueue(agenttest.Reply().Call(0, "call_1", "parts", partsArgs(t, split, 0, true)).Finish("tool_calls"))
		reg, err := agent.NewToolRegistry()
		require.NoError(t, err)
		require.NoError(t, c.Register(reg))
		store := &memory.MemStore{}
		a, err := agent.New(agent.Config{
			BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any",
			Tools: reg, Store: store, Approver: &askingApprover{}, DisablePlanning: true,
		})
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var partial, rejected string
		var chunks []agent.Chunk
		for ch, err := range a.Run(runCtx, agent.Input{SessionID: "s1", Message: "go"}) {
			require.NoError(t, err)
			chunks = append(chunks, ch)
			if ch.Tool != nil && ch.Tool.State == agent.StateExecuting {
				partial += ch.Tool.PartialResult
				if strings.Contains(partial, " and again ") {
					stop() // the second token is held back now
				}
			}
			if ch.Kind == agent.KindToolRejected {
				rejected = ch.Tool.PartialResult
			}
		}
		want := "the key is [redacted]\n and again [redacted]\n"
		assert.Equal(t, want, rejected, "the rejected call's partial output")
		// (The arguments hold the token: they are the model's own words.)
		for _, ch := range chunks {
			if ch.Tool != nil && ch.Tool.PartialResult != "" {
				noToken(t, "a chunk's partial output", ch.Tool.PartialResult)
				assert.NotContains(t, ch.Tool.PartialResult, testToken[:8], "a chunk shows the token's first part")
			}
		}
		history, err := store.Messages(ctx, "s1", true)
		require.NoError(t, err)
		var toolMsg string
		for _, m := range history {
			if m.Role == memory.RoleTool {
				toolMsg = m.Content
			}
		}
		assert.Equal(t, want+"\n[tool call interrupted]", toolMsg, "the stored tool message")
	})
}

// A password with characters that JSON encoders escape reaches the model
// neither from structured content (which a Go server writes with & and <
// escaped), nor from an error that quotes a raw body (written here as
// Python writes it, ö escaped, behind a proxy), nor in part from an embedded resource's
// text cut at its bound in the middle of it.
func TestSecretsEscapedOrCutInResults(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	const pw = "p&ss<wörd>-1234"
	t.Setenv("PLANROUND_TEST_PW", pw)
	srv := server.NewMCPServer("escaper", "1.0.0", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("structured"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructuredOnly(map[string]any{"password": pw}), nil
	})
	srv.AddTool(mcp.NewTool("resource"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text := strings.Repeat("x", maxResourceText-6) + pw + strings.Repeat("y", 100)
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://long", Text: text}),
		}}, nil
	})
	srv.AddTool(mcp.NewTool("boom"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("not reached"), nil
	})
	mcpHandler := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"name":"boom"`) {
			w.WriteHeader(http.StatusInternalServerError)
			// Not a JSON-RPC message: the client quotes it.
			io.WriteString(w, `proxy error; the upstream said {"detail": "bad key p&ss<w\u00f6rd>-1234"`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	c := newClient(t, Options{}, ServerConfig{
		Name:    "escaper",
		URL:     ts.URL + "/mcp",
		Headers: map[string]string{"X-Key": "${PLANROUND_TEST_PW}"},
	})
	// What the model could read the password from: any of the ways a
	// JSON encoder writes it, or its first part.
	shows := func(what, s string) {
		t.Helper()
		for _, leak := range []string{"p&ss<w", `p\u0026ss`, `ss\u003cw`, `w\u00f6rd`, `w\u00F6rd`} {
			if strings.Contains(s, leak) {
				t.Errorf("%s shows the password (%s):\n%s", what, leak, s)
			}
		}
	}

	got, err := run(t, tool(t, c, "structured"), `{}`, nil)
	require.NoError(t, err)
	shows("the structured content", got)
	assert.JSONEq(t, `{"password": "[redacted]"}`, got)

	got, err = run(t, tool(t, c, "resource"), `{}`, nil)
	require.NoError(t, err)
	shows("the resource", got)
	assert.Contains(t, got, "x\n[… 116 more bytes]")

	_, err = run(t, tool(t, c, "boom"), `{}`, nil)
	require.Error(t, err)
	shows("the error", err.Error())
	assert.Contains(t, err.Error(), "bad key [redacted]")
}

// A line of a stdio server's standard error too long to log whole is
// logged in part, ending before a secret that the part would cut.
func TestSecretCutInLongStderrLine(t *testing.T) {
	leaktest.Check(t)
	t.Setenv("PLANROUND_TEST_TOKEN", testToken)
	cfg := stdioConfig(t, "noisy")
	// A shell writes the line, then runs the server in its place.
	script := `printf "%0` + itoa(maxStderrLine-6) + `d" 0 >&2; printf "%s\n" "$API_KEY" >&2; exec "$0" "$@"`
	cfg.Args = append([]string{"-c", script, cfg.Command}, cfg.Args...)
	cfg.Command = "sh"
	cfg.Env = map[string]string{"API_KEY": "${PLANROUND_TEST_TOKEN}"}
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, Options{Logger: logger}, cfg)
	require.NoError(t, c.Close()) // the line is logged by now
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, logs.String(), strings.Repeat("0", 100), "the line is logged")
	assert.NotContains(t, logs.String(), "0"+testToken[:6], "the logged part shows the token's first part")
}
