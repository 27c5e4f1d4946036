package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// live returns how many sessions r keeps live state for.
func live(r *Runner) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// TestIdleSessionsReleased: what looks at a session and finds nothing to
// do leaves no live state behind: Resumes of 50 sessions with nothing to
// resume (new ones, and ones whose turn finished), a subscription that
// ended, Log, Running and Interrupt of idle sessions. A finished turn's
// session is released once its events' grace ended.
func TestIdleSessionsReleased(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := agenttest.NewServer()
	srv.Respond(func(*agenttest.Request) agenttest.Response {
		return agenttest.Reply().Text("Hello! <no_tool>").Finish("stop")
	})
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	st := &memory.MemStore{}
	for _, store := range []struct {
		name string
		st   memory.Store
	}{
		{"event log", &memory.MemStore{}},
		{"no event log", noEventLog{st, st}},
	} {
		t.Run(store.name, func(t *testing.T) {
			r, err := New(Config{Store: store.st, Agent: agent.Config{BaseURL: srv.URL(), APIKey: "k", HTTPClient: srv.Client(), Model: "m"}, TurnGrace: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()

			// A finished turn: its session is kept for the grace only.
			turn, err := r.Start(ctx, agent.Input{SessionID: "done", Message: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			<-turn.Done()
			for deadline := time.Now().Add(5 * time.Second); live(r) > 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := live(r); n != 0 {
				t.Fatalf("%d sessions live after a finished turn's grace, want 0", n)
			}

			for i := range 50 {
				id := fmt.Sprintf("s%d", i)
				if i%2 == 0 {
					id = "done" // a session whose turn finished
				}
				if _, err := r.Resume(ctx, id); !errors.Is(err, agent.ErrNothingToResume) {
					t.Fatalf("Resume(%s) = %v, want ErrNothingToResume", id, err)
				} else if id != "done" && !errors.Is(err, memory.ErrNotFound) {
					t.Fatalf("Resume(%s) of a session the store lacks = %v, want ErrNotFound too", id, err)
				}
			}
			// A Resume creates no session.
			if _, err := store.st.Session(ctx, "s1"); !errors.Is(err, memory.ErrNotFound) {
				t.Errorf("after a Resume of an unknown session, the store has it: %v", err)
			}
			if n := live(r); n != 0 {
				t.Errorf("%d sessions live after 50 Resumes that found nothing, want 0", n)
			}

			sctx, stop := context.WithTimeout(ctx, 20*time.Millisecond)
			for range r.Subscribe(sctx, "idle", 0) {
			}
			stop()
			if _, err := r.Log(ctx, "idle"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Running(ctx, "idle"); err != nil {
				t.Fatal(err)
			}
			if ok, err := r.Interrupt(ctx, "idle"); ok || err != nil {
				t.Fatalf("Interrupt of an idle session = %v, %v; want false, nil", ok, err)
			}
			if n := live(r); n != 0 {
				t.Errorf("%d sessions live after looks at an idle session, want 0", n)
			}
		})
	}
}

// noEventLog is a Store that keeps calls but no event log (nor a
// Notifier, a Leaser): events live in the process only.
type noEventLog struct {
	memory.Store
	memory.CallLog
}
