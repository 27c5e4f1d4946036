package aisdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// byUser lets the user of the X-User header act on the sessions whose id
// starts with their name and a dash.
func byUser(r *http.Request, sessionID string) (string, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return "", ui.ErrUnauthenticated
	}
	if !strings.HasPrefix(sessionID, user+"-") {
		return "", errors.New("not your chat")
	}
	return user, nil
}

// post sends body as user and returns the status and, for a stream, its
// chunks.
func post(t *testing.T, url, user string, body any) (int, []map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", user)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var chunks []map[string]any
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c map[string]any
		if json.Unmarshal([]byte(data), &c) == nil {
			chunks = append(chunks, c)
		}
	}
	return res.StatusCode, chunks
}

func userMessage(text string) map[string]any {
	return map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

// approvalMessage is the assistant message a client sends back with its
// response to the approval of call id with input.
func approvalMessage(approvalID, callID, tool, input string, approved bool) map[string]any {
	return map[string]any{"id": "a1", "role": "assistant", "parts": []any{map[string]any{
		"type": "dynamic-tool", "toolName": tool, "toolCallId": callID, "state": "approval-responded",
		"input": json.RawMessage(input), "approval": map[string]any{"id": approvalID, "approved": approved},
	}}}
}

func find(chunks []map[string]any, typ string) map[string]any {
	for _, c := range chunks {
		if c["type"] == typ {
			return c
		}
	}
	return nil
}

// serveChat serves a handler on b's runner, whose callers are the users
// byUser names, at /api/chat on 127.0.0.1 (useChat's api, with the paths
// below it), and returns that URL.
func serveChat(t *testing.T, b *uitest.Bench) string {
	t.Helper()
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: byUser})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	mux.Handle("/api/chat/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/chat"
}

// TestOwnerAndBinding: nobody decides, stops or follows another person's
// chat, and a decision is taken only for the call the client shows.
func TestOwnerAndBinding(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serveChat(t, b)
	chat := "alice-1"

	status, chunks := post(t, api, "alice", map[string]any{"id": chat, "messages": []any{userMessage(uitest.Weather)}, "trigger": "submit-message"})
	require.Equal(t, http.StatusOK, status)
	req := find(chunks, "tool-approval-request")
	require.NotNil(t, req, "the stream stops at the approval")
	approvalID := req["approvalId"].(string)
	require.Equal(t, "tool-calls", find(chunks, "finish")["finishReason"])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pending := func() int {
		p, err := b.PendingApprovals(ctx, chat)
		require.NoError(t, err)
		return len(p)
	}
	require.Equal(t, 1, pending())

	// Bob: another user's chat.
	status, _ = post(t, api, "bob", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, "call_1", "get_weather", `{"city":"Lima"}`, true)}})
	require.Equal(t, http.StatusForbidden, status)
	status, _ = post(t, api+"/"+chat+"/stop", "bob", nil)
	require.Equal(t, http.StatusForbidden, status)
	res, err := http.Get(api + "/" + chat + "/stream")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "no user")
	// Bob naming his own chat with Alice's approval id.
	status, _ = post(t, api, "bob", map[string]any{"id": "bob-1", "messages": []any{approvalMessage(approvalID, "call_1", "get_weather", `{"city":"Lima"}`, true)}})
	require.Equal(t, http.StatusForbidden, status, "an approval of another session")
	require.Equal(t, 1, pending(), "nothing was decided")

	// Alice, but for other arguments than those she was shown, another
	// call or another tool.
	for _, m := range []map[string]any{
		approvalMessage(approvalID, "call_1", "get_weather", `{"city":"Paris"}`, true),
		approvalMessage(approvalID, "call_9", "get_weather", `{"city":"Lima"}`, true),
		approvalMessage(approvalID, "call_1", "slow_task", `{"city":"Lima"}`, true),
	} {
		status, _ = post(t, api, "alice", map[string]any{"id": chat, "messages": []any{m}})
		require.Equal(t, http.StatusConflict, status)
	}
	require.Equal(t, 1, pending())
	require.Zero(t, b.Runs.Load())

	// Alice, for what she saw (keys in another order, other spacing).
	status, chunks = post(t, api, "alice", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, "call_1", "get_weather", `{ "city" : "Lima" }`, true)}})
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, find(chunks, "tool-input-start"), "the continuation does not show the call again")
	require.Equal(t, "sunny in Lima", find(chunks, "tool-output-available")["output"])
	require.Equal(t, "stop", find(chunks, "finish")["finishReason"])
	require.EqualValues(t, 1, b.Runs.Load())

	// The audit names the user and the protocol.
	var seen bool
	for d, err := range b.Runner.Decisions(ctx, approval.DecisionQuery{SessionID: chat}) {
		require.NoError(t, err)
		require.Equal(t, "alice", d.Decision.By)
		require.Equal(t, Via, d.Decision.Via)
		seen = true
	}
	require.True(t, seen)

	// The same response again (a retry) decides nothing more.
	status, _ = post(t, api, "alice", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, "call_1", "get_weather", `{"city":"Lima"}`, true)}})
	require.Equal(t, http.StatusConflict, status, "nothing pending once the turn is over")
	require.EqualValues(t, 1, b.Runs.Load())
}

// TestRequestErrors: bad requests get a clear error and change nothing.
func TestRequestErrors(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	_, err := NewHandler(ui.Config{Runner: b.Runner})
	require.Error(t, err, "no Authorize")
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: ui.AllowAnyCaller})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		body   string
		status int
		says   string
	}{
		{`{`, http.StatusBadRequest, ""},
		{`{"messages":[]}`, http.StatusBadRequest, "missing the chat id"},
		{`{"id":"a\u0000b","messages":[]}`, http.StatusBadRequest, "control character"},
		{`{"id":"` + strings.Repeat("x", 257) + `","messages":[]}`, http.StatusBadRequest, "longer than 256"},
		{`{"id":"s","messages":[]}`, http.StatusBadRequest, "missing messages"},
		{`{"id":"s","trigger":"regenerate-message","messages":[{"role":"user","parts":[]}]}`, http.StatusBadRequest, "regenerat"},
		{`{"id":"s","messages":[{"role":"user","parts":[{"type":"file","url":"x"}]}]}`, http.StatusBadRequest, "no text"},
		{`{"id":"s","messages":[{"role":"assistant","parts":[]}]}`, http.StatusBadRequest, "nothing to do"},
		{`{"id":"s","messages":[{"role":"user","parts":[]}],"planround":{"form":{"id":"f"}}}`, http.StatusBadRequest, "has no answers"},
		{`{"id":"s","messages":[{"role":"user","parts":[]}],"planround":{"form":{"id":"f","answers":{"q":"a"}}}}`, http.StatusConflict, "no longer pending"}, // no such form
	} {
		res, err := http.Post(srv.URL, "application/json", strings.NewReader(c.body))
		require.NoError(t, err)
		var out struct{ Error string }
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		require.Equal(t, c.status, res.StatusCode, c.body)
		require.Contains(t, out.Error, c.says, c.body)
	}
	res, err := http.Get(srv.URL + "/s/stream")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNoContent, res.StatusCode, "no turn to resume")
	res, err = http.Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

// FuzzChatRequest: whatever the body, the handler answers without
// panicking, with a status it documents.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"s","messages":[{"role":"assistant","parts":[{"type":"dynamic-tool","state":"approval-responded","approval":{"id":"x","approved":true}}]}]}`,
		`{"id":"s","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}],"planround":{"form":{"id":"f","answers":{"a":"b"}}}}`,
		`{"id":"s","messages":[null]}`, `{"id":"s","messages":[{"parts":[{"approval":null}]}]}`, `[]`, `null`,
	} {
		f.Add(s)
	}
	b := uitest.New(f, uitest.Options{})
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: ui.AllowAnyCaller})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		if strings.Contains(body, `"user"`) {
			return // would start turns against the model: not this test's subject
		}
		req := httptest.NewRequest(http.MethodPost, "/api/chat", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusConflict, http.StatusForbidden, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if rec.Code != http.StatusOK && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("not a JSON error: %s", rec.Body)
		}
	})
}

// TestNewMessageWhileWaiting: a user who sends a new message instead of
// answering an approval moves on: the waiting turn is stopped (its
// approval cancelled, its call never run) and the new message answered.
func TestNewMessageWhileWaiting(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: ui.AllowAnyCaller})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	status, chunks := post(t, srv.URL, "x", map[string]any{"id": "s1", "messages": []any{userMessage(uitest.Weather)}})
	require.Equal(t, http.StatusOK, status)
	require.NotNil(t, find(chunks, "tool-approval-request"))

	status, chunks = post(t, srv.URL, "x", map[string]any{"id": "s1", "messages": []any{userMessage(uitest.Hello)}})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "stop", find(chunks, "finish")["finishReason"])
	require.Contains(t, find(chunks, "text-delta")["delta"], "Hello")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := b.PendingApprovals(ctx, "s1")
	require.NoError(t, err)
	require.Empty(t, p)
	require.Zero(t, b.Runs.Load())
}

// TestEchoBinding: a client that sends a call's input back as JavaScript
// reads and writes it decides the call it was shown, which runs with its
// arguments as the model wrote them; an echo of other values, another
// call or another tool decides nothing (409).
func TestEchoBinding(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: byUser})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	chat := "alice-echo"
	const args = `{"price":2.50,"qty":20.0,"n":1e3,"z":-0,"big":12345678901234567890,"city":"Lima"}`

	status, chunks := post(t, srv.URL, "alice", map[string]any{"id": chat, "messages": []any{userMessage(uitest.Order + args)}})
	require.Equal(t, http.StatusOK, status)
	req := find(chunks, "tool-approval-request")
	require.NotNil(t, req)
	approvalID := req["approvalId"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pending := func() int {
		p, err := b.PendingApprovals(ctx, chat)
		require.NoError(t, err)
		return len(p)
	}

	for _, c := range []struct{ name, callID, tool, input string }{
		{"another string", "call_o", "place_order", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Paris"}`},
		{"another number", "call_o", "place_order", `{"price":2.6,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima"}`},
		{"a big integer that is not the shown one's rounding", "call_o", "place_order", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234577000,"city":"Lima"}`},
		{"a number as a string", "call_o", "place_order", `{"price":"2.5","qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima"}`},
		{"an extra key", "call_o", "place_order", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima","to":"mallory"}`},
		{"a key less", "call_o", "place_order", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000}`},
		{"another call", "call_9", "place_order", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima"}`},
		{"another tool", "call_o", "get_weather", `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima"}`},
	} {
		for _, approved := range []bool{true, false} {
			status, _ = post(t, srv.URL, "alice", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, c.callID, c.tool, c.input, approved)}})
			require.Equal(t, http.StatusConflict, status, "%s (approved %v)", c.name, approved)
		}
	}
	require.Equal(t, 1, pending(), "nothing was decided")
	require.Empty(t, b.Orders())

	// What JSON.stringify writes of the shown input, keys reordered as
	// JavaScript orders them.
	echo := `{"price":2.5,"qty":20,"n":1000,"z":0,"big":12345678901234567000,"city":"Lima"}`
	status, chunks = post(t, srv.URL, "alice", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, "call_o", "place_order", echo, true)}})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ordered "+args, find(chunks, "tool-output-available")["output"])
	require.Equal(t, []string{args}, b.Orders(), "the call ran once, with the arguments as shown")
	var audited bool
	for d, err := range b.Runner.Decisions(ctx, approval.DecisionQuery{SessionID: chat}) {
		require.NoError(t, err)
		require.Equal(t, string(d.Arguments), args, "the audit keeps the arguments shown")
		audited = true
	}
	require.True(t, audited)
}

// get sends a GET as user and returns the status and the body.
func get(t *testing.T, url, user string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}

// TestMessages: GET {api}/{id}/messages answers the owner only; an
// unknown chat has no messages and is not created; a finished turn is one
// assistant message with its text and its denied call.
func TestMessages(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	api := serveChat(t, b)

	status, body := get(t, api+"/alice-new/messages", "alice")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "[]\n", body)
	_, err := b.Runner.Agent().Store().Session(t.Context(), "alice-new")
	require.ErrorIs(t, err, memory.ErrNotFound, "loading an unknown chat does not create it")

	chat := "alice-2"
	status, chunks := post(t, api, "alice", map[string]any{"id": chat, "messages": []any{userMessage(uitest.Weather)}})
	require.Equal(t, http.StatusOK, status)
	approvalID := find(chunks, "tool-approval-request")["approvalId"].(string)

	status, _ = get(t, api+"/"+chat+"/messages", "bob")
	require.Equal(t, http.StatusForbidden, status)
	status, _ = get(t, api+"/"+chat+"/messages", "")
	require.Equal(t, http.StatusUnauthorized, status)
	res, err := http.Post(api+"/"+chat+"/messages", "application/json", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)

	// While the turn waits in this process, it is the reconnect's: the
	// history ends with its user message.
	status, body = get(t, api+"/"+chat+"/messages", "alice")
	require.Equal(t, http.StatusOK, status)
	var msgs []UIMessage
	require.NoError(t, json.Unmarshal([]byte(body), &msgs))
	require.Len(t, msgs, 1, body)
	require.Equal(t, "user", msgs[0].Role)
	require.Equal(t, uitest.Weather, msgs[0].Parts[0].Text)

	status, _ = post(t, api, "alice", map[string]any{"id": chat, "messages": []any{approvalMessage(approvalID, "call_1", "get_weather", `{"city":"Lima"}`, false)}})
	require.Equal(t, http.StatusOK, status)
	require.Eventually(t, func() bool {
		state, err := b.Runner.Log(t.Context(), chat)
		return err == nil && !state.Running()
	}, 10*time.Second, 10*time.Millisecond)
	status, body = get(t, api+"/"+chat+"/messages", "alice")
	require.Equal(t, http.StatusOK, status)
	msgs = nil
	require.NoError(t, json.Unmarshal([]byte(body), &msgs))
	require.Len(t, msgs, 2, body)
	require.Equal(t, "assistant", msgs[1].Role)
	var tool *UIPart
	for i, p := range msgs[1].Parts {
		if p.Type == "dynamic-tool" {
			tool = &msgs[1].Parts[i]
		}
	}
	require.NotNil(t, tool, body)
	require.Equal(t, "output-denied", tool.State, body)
	require.Equal(t, "get_weather", tool.ToolName)
	require.JSONEq(t, `{"city":"Lima"}`, string(tool.Input))
	require.NotNil(t, tool.Approval)
	require.False(t, *tool.Approval.Approved)
	require.Equal(t, map[string]any{"planround": map[string]any{"arguments_text": `{"city":"Lima"}`, "cause": "user"}}, tool.ToolMetadata)
}

// TestMessagesAskInput: a reloaded ask_user_question call carries the
// call's arguments (the questions) as its input, as the live stream's
// tool-input-available gave them: while its form waits in a suspended
// turn (the page loads it from the Store), and once answered.
func TestMessagesAskInput(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{SuspendAfter: 50 * time.Millisecond})
	api := serveChat(t, b)
	chat := "alice-ask"
	ended := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			state, err := b.Runner.Log(t.Context(), chat)
			return err == nil && !state.Running()
		}, 10*time.Second, 10*time.Millisecond)
	}
	askPart := func() UIPart {
		t.Helper()
		status, body := get(t, api+"/"+chat+"/messages", "alice")
		require.Equal(t, http.StatusOK, status)
		var msgs []UIMessage
		require.NoError(t, json.Unmarshal([]byte(body), &msgs))
		for _, m := range msgs {
			for _, p := range m.Parts {
				if p.Type == "dynamic-tool" && p.ToolName == "ask_user_question" {
					return p
				}
			}
		}
		t.Fatalf("no ask_user_question part in %s", body)
		return UIPart{}
	}

	status, chunks := post(t, api, "alice", map[string]any{"id": chat, "messages": []any{userMessage(uitest.Ask)}})
	require.Equal(t, http.StatusOK, status)
	live := find(chunks, "tool-input-available")
	require.NotNil(t, live)
	require.Equal(t, "ask_user_question", live["toolName"])
	liveInput, err := json.Marshal(live["input"])
	require.NoError(t, err)
	require.JSONEq(t, uitest.AskArgs, string(liveInput), "the live stream's input")
	formID := find(chunks, "data-planround-form")["id"].(string)

	ended() // suspended: the form waits in the Store
	p := askPart()
	require.Equal(t, "input-available", p.State)
	require.JSONEq(t, uitest.AskArgs, string(p.Input), "the reloaded input of the call whose form waits")

	status, _ = post(t, api, "alice", map[string]any{"id": chat, "messages": []any{userMessage(uitest.Ask)},
		"planround": map[string]any{"form": map[string]any{"id": formID, "answers": map[string]any{"city": []string{"Quito"}}}}})
	require.Equal(t, http.StatusOK, status)
	ended()
	p = askPart()
	require.Equal(t, "output-available", p.State)
	require.JSONEq(t, uitest.AskArgs, string(p.Input), "the reloaded input of the answered call")
}
