package agui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/internal/uitest"
)

// startSlow starts the slow task's turn with h's config changed by set,
// reads its events until the task runs, and then drops the request.
func startSlow(t *testing.T, set func(*ui.Config)) *fixture {
	t.Helper()
	f := newFixture(t, uitest.Options{})
	cfg := f.h.cfg
	set(&cfg)
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = h

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, _ := json.Marshal(userInput("thread-slow", uitest.Slow))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"name":"planround.tool_progress"`) {
			return f // the deferred cancel drops the request
		}
	}
	t.Fatalf("the stream ended before the slow task ran: %v", sc.Err())
	return nil
}

func TestDisconnectInterruptsTheTurn(t *testing.T) {
	f := startSlow(t, func(*ui.Config) {})
	if st := lastEnded(t, f.b.Runner, "thread-slow").Status; st != runner.StatusInterrupted {
		t.Errorf("the turn ended %s, want interrupted", st)
	}
}

func TestKeepRunningOnDisconnect(t *testing.T) {
	f := startSlow(t, func(c *ui.Config) { c.KeepRunningOnDisconnect = true })
	time.Sleep(200 * time.Millisecond) // time for a wrong interrupt to land
	running, err := f.b.Runner.Running(context.Background(), "thread-slow")
	if err != nil || !running {
		t.Fatalf("the turn stopped with its client (running %v, %v)", running, err)
	}
	if _, err := f.b.Runner.Interrupt(context.Background(), "thread-slow"); err != nil {
		t.Fatal(err)
	}
	if st := lastEnded(t, f.b.Runner, "thread-slow").Status; st != runner.StatusInterrupted {
		t.Errorf("the turn ended %s, want interrupted", st)
	}
}
