package agui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/ui/internal/uitest"
)

// TestSendRightAfterAbort: a run's tool takes a moment to wind down once
// interrupted; the client aborts the run (abortRun drops its stream, which
// stops the turn) and starts its next run at once. That run is answered,
// never refused with 409, twenty times in a row.
func TestSendRightAfterAbort(t *testing.T) {
	f := newFixture(t, uitest.Options{WindDown: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 20 {
		started := f.b.SlowStarted.Load()
		abortSlow(ctx, t, f, "thread-1")
		if f.b.SlowStarted.Load() == started {
			t.Fatalf("round %d: the slow task did not run", i)
		}
		in := userInput("thread-1", uitest.Hello)
		in.RunID = fmt.Sprintf("hello-%d", i)
		status, events, msg := f.post(t, "alice", in)
		if status != http.StatusOK {
			t.Fatalf("round %d: the run started right after the abort: %d %s", i, status, msg)
		}
		if last := events[len(events)-1]; last["type"] != "RUN_FINISHED" {
			t.Fatalf("round %d: the run ended with %s", i, types(events))
		}
	}
}

// abortSlow starts the slow task's run on thread sid as alice, reads its
// events until the task runs, and drops the request.
func abortSlow(ctx context.Context, t *testing.T, f *fixture, sid string) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b, _ := json.Marshal(userInput(sid, uitest.Slow))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("starting the slow task: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"name":"planround.tool_progress"`) {
			return // the deferred cancel drops the request
		}
	}
	t.Fatalf("the stream ended before the slow task ran: %v", sc.Err())
}

// TestNodeSendRightAfterAbort is TestSendRightAfterAbort with the real
// client: abortRun once the slow task runs, then runAgent with a new
// message at once, thirty times; no run is refused.
func TestNodeSendRightAfterAbort(t *testing.T) {
	uitest.NPMDir(t)
	f := newFixture(t, uitest.Options{WindDown: 50 * time.Millisecond})
	out := uitest.Node(t, 2*time.Minute, "testdata/stopsend.mjs", f.srv.URL, "thread-stopsend", "30")
	var got struct {
		Rounds  int      `json:"rounds"`
		Refused int      `json:"refused"`
		Errors  []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Rounds != 30 || got.Refused != 0 || len(got.Errors) > 0 {
		t.Errorf("%d rounds, %d runs refused with 409 right after an abort, errors %q; want 30, 0, none", got.Rounds, got.Refused, got.Errors)
	}
}
