package aisdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// streamSlow posts the slow task to chat id and reads its stream until
// the task runs. It returns the rest of the stream and the function that
// drops the request (as useChat's stop() does).
func streamSlow(ctx context.Context, t *testing.T, url string, b *uitest.Bench, id string) (rest io.ReadCloser, drop func()) {
	t.Helper()
	started := b.SlowStarted.Load()
	raw, err := json.Marshal(map[string]any{"id": id, "messages": []any{userMessage(uitest.Slow)}})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "x")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"type":"tool-input-available"`) {
	}
	for b.SlowStarted.Load() == started {
		select {
		case <-ctx.Done():
			t.Fatal("the slow task did not start")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return res.Body, func() {
		cancel()
		res.Body.Close()
	}
}

// TestSendRightAfterStop: a turn runs a tool that takes a moment to wind
// down once interrupted; the client stops it, by the stop endpoint
// (acknowledged with was_active) or by dropping its stream as useChat's
// stop() does, and sends its next message at once. The message is
// answered, never refused with 409, twenty times in a row each way.
func TestSendRightAfterStop(t *testing.T) {
	for _, how := range []string{"stop endpoint", "dropped stream"} {
		t.Run(how, func(t *testing.T) {
			leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b := uitest.New(t, uitest.Options{WindDown: 50 * time.Millisecond})
			h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: ui.AllowAnyCaller})
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			for i := range 20 {
				rest, drop := streamSlow(ctx, t, srv.URL, b, "s1")
				if how == "stop endpoint" {
					status, out := postJSON(t, srv.URL+"/s1/stop")
					require.Equal(t, http.StatusOK, status, "round %d", i)
					assert.Equal(t, true, out["was_active"], "round %d", i)
				} else {
					drop()
				}
				status, chunks := post(t, srv.URL, "x", map[string]any{"id": "s1", "messages": []any{userMessage(uitest.Hello)}})
				_, _ = io.Copy(io.Discard, rest) // the stopped turn's stream has ended
				drop()
				require.Equal(t, http.StatusOK, status, "round %d: the message sent right after the stop", i)
				require.NotNil(t, find(chunks, "finish"), "round %d", i)
				require.Contains(t, find(chunks, "text-delta")["delta"], "Hello", "round %d", i)
			}
		})
	}
}

// TestStopIdle: stopping a chat where nothing runs, or one that was never
// used, answers {"success":true,"was_active":false}; another person's
// chat is refused.
func TestStopIdle(t *testing.T) {
	leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
	b := uitest.New(t, uitest.Options{})
	h, err := NewHandler(ui.Config{Runner: b.Runner, Authorize: byUser})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	status, _ := post(t, srv.URL, "x", map[string]any{"id": "x-1", "messages": []any{userMessage(uitest.Hello)}})
	require.Equal(t, http.StatusOK, status)
	for _, id := range []string{"x-1", "x-never"} {
		status, out := postAs(t, srv.URL+"/"+id+"/stop", "x")
		assert.Equal(t, http.StatusOK, status, id)
		assert.Equal(t, map[string]any{"success": true, "was_active": false}, out, id)
	}
	status, out := postAs(t, srv.URL+"/x-1/stop", "y")
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, false, out["success"])
}

// postJSON posts an empty body to url as anyone and returns the status
// and the JSON answer.
func postJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	return postAs(t, url, "x")
}

func postAs(t *testing.T, url, user string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	require.NoError(t, err)
	req.Header.Set("X-User", user)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return res.StatusCode, out
}

// TestNodeSendRightAfterStop is TestSendRightAfterStop with the ai
// package's own client: chat.stop(), or the stop path then chat.stop(),
// then sendMessage at once, thirty times each; no message is refused.
func TestNodeSendRightAfterStop(t *testing.T) {
	uitest.NPMDir(t)
	for _, how := range []string{"stop", "endpoint"} {
		t.Run(how, func(t *testing.T) {
			leaktest.Check(t, http.DefaultClient.CloseIdleConnections)
			b := uitest.New(t, uitest.Options{WindDown: 50 * time.Millisecond})
			url := serve(t, b, nil)
			out := uitest.Node(t, 2*time.Minute, "testdata/stopsend.mjs", url, how, "30")
			var got struct {
				Rounds  int      `json:"rounds"`
				Refused int      `json:"refused"`
				Errors  []string `json:"errors"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &got), out)
			assert.Equal(t, 30, got.Rounds)
			assert.Zero(t, got.Refused, "messages refused with 409 right after a stop")
			assert.Empty(t, got.Errors)
		})
	}
}
