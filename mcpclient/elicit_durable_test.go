package mcpclient

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/sqlitestore"
)

// durableStore is what a replica keeps its conversations and forms in.
type durableStore interface {
	memory.Store
	memory.ApprovalStore
	memory.Notifier
}

// closer ends a store: pgstore's Close returns nothing, sqlitestore's an
// error.
func closeStore(t *testing.T, st durableStore) {
	switch c := st.(type) {
	case interface{ Close() error }:
		if err := c.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	case interface{ Close() }:
		c.Close()
	}
}

// An elicitation asked on replica A is answered on replica B after A is
// gone (its store, forms and MCP client closed): B's resumed turn runs the
// call again, the server asks again, finds the answer given meanwhile, and
// the call completes with it.
func TestElicitationAcrossReplicasPostgres(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url, "mcpclient_elicit_")
	testElicitationAcrossReplicas(t, func(t *testing.T) durableStore {
		st, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// The same on one SQLite file, across a restart.
func TestElicitationAcrossRestartSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat.db")
	testElicitationAcrossReplicas(t, func(t *testing.T) durableStore {
		st, err := sqlitestore.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func testElicitationAcrossReplicas(t *testing.T, open func(*testing.T) durableStore) {
	leaktest.Check(t)
	server := elicitFixture(t, TransportHTTP, "")
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(
		agenttest.Reply().Call(0, "call_1", "ask", `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Hello Ada.").Finish("stop"),
	)
	replica := func(st durableStore) (*agent.Agent, *person.Forms, func()) {
		forms, err := person.StartForms(person.FormsConfig{Store: st, Notifier: st, Timeout: time.Hour, SuspendAfter: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c, err := New(ctx, []ServerConfig{server}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := agent.NewToolRegistry()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(reg); err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{
			BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any", Tools: reg, Store: st, DisablePlanning: true,
			Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
				return agent.Decision{Approved: true}, nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		end := sync.OnceFunc(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close the client: %v", err)
			}
			_ = forms.Close()
			closeStore(t, st)
		})
		t.Cleanup(end)
		return a, forms, end
	}
	run := func(seq func(func(agent.Chunk, error) bool)) (chunks []agent.Chunk, shown []interact.ElicitationRequest) {
		for c, err := range seq {
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			chunks = append(chunks, c)
			if r, ok := c.Side.(interact.ElicitationRequest); ok {
				shown = append(shown, r)
			}
		}
		return chunks, shown
	}

	// Replica A: the server asks, nobody answers, the run suspends, and
	// A goes away.
	a, formsA, closeA := replica(open(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	chunks, shown := run(a.Run(interact.WithAsker(ctx, formsA), agent.Input{SessionID: "s1", Message: "greet me"}))
	if len(shown) != 1 || chunks[len(chunks)-1].Kind != agent.KindSuspended {
		t.Fatalf("on A: shown %d requests, last chunk %v; want 1 and a suspension; chunks: %s", len(shown), chunks[len(chunks)-1].Kind, describeChunks(chunks))
	}
	formID := shown[0].FormID
	closeA()

	// Replica B lists the form, takes the answer, resumes the turn.
	stB := open(t)
	b, formsB, closeB := replica(stB)
	defer closeB()
	pending, err := formsB.Pending(ctx, "s1")
	if err != nil || len(pending) != 1 || pending[0].FormID != formID || pending[0].Elicitation == nil ||
		pending[0].Type != interact.TypeElicitationRequest || pending[0].Elicitation.Message != "Who are you?" {
		t.Fatalf("pending on B: %+v, %v", pending, err)
	}
	ok, err := formsB.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: formID, By: "ada",
		Elicitation: &interact.ElicitationAnswer{Action: interact.ActionAccept, Content: map[string]any{"name": "Ada", "age": 36}}})
	if err != nil || !ok {
		t.Fatalf("Answer on B = %v, %v", ok, err)
	}
	chunks, shown = run(b.Resume(interact.WithAsker(ctx, formsB), "s1"))
	if len(shown) != 0 {
		t.Errorf("the resumed call asked again: %+v", shown)
	}
	var result string
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool != nil && c.Tool.State == agent.StateResult {
			result = c.Tool.Result
		}
	}
	if result != "accept name=Ada age=36 state=state-1" {
		t.Errorf("the call's result on B: %q", result)
	}
	reqs := model.Requests()
	tool, ok := reqs[len(reqs)-1].LastMessageWithRole("tool")
	if !ok || !strings.Contains(tool.Content, "name=Ada") {
		t.Errorf("the model read %q", tool.Content)
	}
	if p, _ := formsB.Pending(ctx, "s1"); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
}

// describeChunks is chunks as JSON, for a failure's message.
func describeChunks(chunks []agent.Chunk) string {
	b, _ := json.Marshal(chunks)
	return string(b)
}
