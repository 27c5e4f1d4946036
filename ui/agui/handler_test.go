package agui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui/internal/uitest"
)

// owners is the Authorize of the tests: the X-User header names the
// principal, and the first principal to use a thread owns it.
type owners struct{ m sync.Map }

func (o *owners) authorize(r *http.Request, sessionID string) (string, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return "", approval.ErrUnauthenticated
	}
	if owner, _ := o.m.LoadOrStore(sessionID, user); owner != user {
		return "", errors.New("thread " + sessionID + " belongs to someone else")
	}
	return user, nil
}

type fixture struct {
	b   *uitest.Bench
	h   *Handler
	srv *httptest.Server
}

func newFixture(t *testing.T, o uitest.Options) *fixture {
	t.Helper()
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	b := uitest.New(t, o)
	var own owners
	h, err := NewHandler(Config{Runner: b.Runner, Approvals: b.Approvals, Forms: b.Forms, Authorize: own.authorize})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &fixture{b: b, h: h, srv: srv}
}

// post sends body as user and returns the status and the events (or the
// JSON error) of the answer.
func (f *fixture) post(t *testing.T, user string, body any) (int, []map[string]any, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, nil, e.Error
	}
	var events []map[string]any
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return res.StatusCode, events, ""
}

func types(events []map[string]any) string {
	var s []string
	for _, e := range events {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

// lastEnded waits for the thread's turn to end and returns how.
func lastEnded(t *testing.T, r *runner.Runner, sid string) runner.TurnEnded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		st, err := r.Log(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running() {
			var ended runner.TurnEnded
			for e, err := range r.Subscribe(ctx, sid, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Kind == runner.EventTurnEnded {
					ended = *e.Ended
				}
				if e.Seq >= st.Last {
					break
				}
			}
			return ended
		}
		select {
		case <-ctx.Done():
			t.Fatal("the turn did not end")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestNodeScenarios(t *testing.T) {
	uitest.NPMDir(t)
	for _, sc := range []string{"hello", "approve", "reject", "abort", "form", "card", "research"} {
		t.Run(sc, func(t *testing.T) {
			f := newFixture(t, uitest.Options{})
			out := uitest.Node(t, 60*time.Second, "testdata/agui.mjs", f.srv.URL, sc, "thread-"+sc)
			t.Log(out)
		})
	}
}
