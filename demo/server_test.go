package demo_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/planround/planround/internal/demo"
)

// post sends a chat-completions request for msgs to the server at baseURL
// with key as the bearer token ("" sends none) and returns the status and
// the number of body bytes.
func post(t *testing.T, baseURL, key string, stream bool, tools []string, msgs ...map[string]string) (int, int64) {
	t.Helper()
	body := map[string]any{"model": "demo", "messages": msgs, "stream": stream}
	var defs []map[string]any
	for _, name := range tools {
		defs = append(defs, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}})
	}
	if defs != nil {
		body["tools"] = defs
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+"/chat/completions", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, n
}

func msg(role, content string) map[string]string {
	return map[string]string{"role": role, "content": content}
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestServerKeepsNoRequests: the demo model answers turn after turn of a
// long-running web chat without keeping the requests it answered.
func TestServerKeepsNoRequests(t *testing.T) {
	s := demo.Model{}.NewServer()
	defer s.Close()
	const turns, size = 300, 64 << 10 // 19 MB of requests in all
	filler := strings.Repeat("x", size)
	before := heapAlloc()
	for i := range turns {
		status, _ := post(t, s.URL(), s.APIKey(), true, nil, msg("user", fmt.Sprintf("hello %d %s", i, filler)))
		if status != http.StatusOK {
			t.Fatalf("turn %d: status %d", i, status)
		}
	}
	after := heapAlloc()
	if grown := int64(after) - int64(before); grown > 8<<20 {
		t.Errorf("the heap grew by %d MB over %d turns of %d KB: the requests are kept", grown>>20, turns, size>>10)
	}
}

// TestRepliesToHugeMessagesAreBounded: a message of a megabyte gets a reply
// of a few kilobytes, whatever the reply quotes of it.
func TestRepliesToHugeMessagesAreBounded(t *testing.T) {
	s := demo.Model{}.NewServer()
	defer s.Close()
	huge := strings.Repeat("blah ", 200<<10) // 1 MB
	const limit = 32 << 10
	for _, tc := range []struct {
		name  string
		tools []string
		msgs  []map[string]string
	}{
		{"plan", nil, []map[string]string{msg("user", "run `"+huge+"` and show a card about "+huge)}},
		{"answer", nil, []map[string]string{msg("user", huge), msg("assistant", "ok <no_tool>"), msg("user", "[continue]")}},
		{"tool calls", []string{"run_command", "show_card"}, []map[string]string{msg("user", "run `"+huge+"` and show a card about "+huge), msg("assistant", "ok <need_tool>"), msg("user", "[continue]")}},
	} {
		for _, stream := range []bool{true, false} {
			status, n := post(t, s.URL(), s.APIKey(), stream, tc.tools, tc.msgs...)
			if status != http.StatusOK {
				t.Fatalf("%s (stream %v): status %d", tc.name, stream, status)
			}
			if n > limit {
				t.Errorf("%s (stream %v): a reply of %d KB to a message of 1 MB", tc.name, stream, n>>10)
			}
		}
	}
}

// TestServerAnswersOnlyItsKey: the demo model's port on 127.0.0.1 refuses
// requests that do not carry its random key, so other local processes
// cannot use it.
func TestServerAnswersOnlyItsKey(t *testing.T) {
	s := demo.Model{}.NewServer()
	defer s.Close()
	other := demo.Model{}.NewServer()
	other.Close()
	if s.APIKey() == "" || s.APIKey() == other.APIKey() {
		t.Fatalf("APIKey %q: want a fresh random key per server", s.APIKey())
	}
	for _, key := range []string{"", "k", s.APIKey() + "x"} {
		if status, _ := post(t, s.URL(), key, true, nil, msg("user", "hello")); status != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", key, status)
		}
	}
	if status, _ := post(t, s.URL(), s.APIKey(), true, nil, msg("user", "hello")); status != http.StatusOK {
		t.Errorf("the server's own key: status %d, want 200", status)
	}
}
