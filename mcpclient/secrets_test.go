package mcpclient

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
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
