package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// callAs runs a turn of the conversation (session) in which the model calls
// the tool once, and returns the call's last chunk.
func callAs(t *testing.T, c *Client, session, name, args string) agent.ToolCall {
	t.Helper()
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		if req.LastMessage().Role == "tool" {
			return agenttest.Reply().Text("ok").Finish("stop")
		}
		return agenttest.Reply().Call(0, "call_1", name, args).Finish("tool_calls")
	})
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		BaseURL:         "http://model.invalid/v1",
		HTTPClient:      &http.Client{Transport: model},
		Model:           "any",
		Tools:           reg,
		DisablePlanning: true,
		Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Approved: true}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := toolChunks(collect(t, a, ctx, agent.Input{SessionID: session, Message: "go"}))
	if len(calls) == 0 {
		t.Fatal("no tool call")
	}
	return calls[len(calls)-1]
}

// Each conversation gets its own instance of a per_conversation server:
// state in one is invisible to the other, and ending a conversation ends
// its process.
func TestPerConversationInstances(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "sandboxed")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)
	if st := c.Servers()[0]; st.State != StateOnDemand || len(st.Tools) != len(testTools) || st.PID != 0 {
		t.Errorf("status = %+v, want on demand with the probed tools", st)
	}

	for _, step := range []struct{ session, want string }{{"a", "1"}, {"a", "2"}, {"b", "1"}, {"a", "3"}} {
		if got := callAs(t, c, step.session, "counter", `{}`); got.Result != step.want {
			t.Errorf("counter in %s = %q, want %q", step.session, got.Result, step.want)
		}
	}
	pa, _ := strconv.Atoi(callAs(t, c, "a", "pid", `{}`).Result)
	pb, _ := strconv.Atoi(callAs(t, c, "b", "pid", `{}`).Result)
	if pa == 0 || pb == 0 || pa == pb {
		t.Fatalf("pids %d and %d, want two processes", pa, pb)
	}
	if n := c.Servers()[0].Instances; n != 2 {
		t.Errorf("instances = %d, want 2", n)
	}

	c.CloseConversation("a")
	waitFor(t, "the ended conversation's process is gone", func() bool { return processGone(pa) })
	if processGone(pb) {
		t.Error("the other conversation's process is gone too")
	}
	if got := callAs(t, c, "a", "counter", `{}`); got.Result != "1" {
		t.Errorf("counter after the conversation was closed = %q, want a fresh instance", got.Result)
	}

	got := callAs(t, c, "", "counter", `{}`)
	if !strings.Contains(got.Result, "belongs to none") {
		t.Errorf("a call without a session: %+v, want an error for the model", got)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pb) {
		t.Error("Close left a conversation's process running")
	}
}

// A conversation whose instance crashed gets a fresh one on its next call.
func TestPerConversationCrash(t *testing.T) {
	leaktest.Check(t)
	cfg := stdioConfig(t, "sandboxed")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)

	callAs(t, c, "a", "counter", `{}`)
	if got := callAs(t, c, "a", "crash", `{}`); !strings.Contains(got.Result, "exit status 3") {
		t.Errorf("crash: %+v, want the exit in the error", got)
	}
	if got := callAs(t, c, "a", "counter", `{}`); got.Result != "1" {
		t.Errorf("counter after the crash = %q, want a fresh instance", got.Result)
	}
}

// sessionContext returns a context carrying a tool call of the conversation
// session, as the agent gives one to a tool's Execute: it runs a one-call
// turn on a scripted model and keeps the context its tool got, without the
// cancellation the end of the run brings.
func sessionContext(t testing.TB, session string) context.Context {
	t.Helper()
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		if req.LastMessage().Role == "tool" {
			return agenttest.Reply().Text("ok").Finish("stop")
		}
		return agenttest.Reply().Call(0, "call_1", "capture", `{}`).Finish("tool_calls")
	})
	var captured context.Context
	reg, err := agent.NewToolRegistry(agent.FuncTool{
		Def: agent.ToolDefinition{Name: "capture", SkipApproval: true},
		Fn: func(ctx context.Context, _ json.RawMessage, _ agent.Progress) (string, error) {
			captured = context.WithoutCancel(ctx)
			return "ok", nil
		},
	})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{
		BaseURL:         "http://model.invalid/v1",
		HTTPClient:      &http.Client{Transport: model},
		Model:           "any",
		Tools:           reg,
		DisablePlanning: true,
	})
	require.NoError(t, err)
	for _, err := range a.Run(t.Context(), agent.Input{SessionID: session, Message: "go"}) {
		require.NoError(t, err)
	}
	require.NotNil(t, captured, "the tool was not called")
	call, ok := agent.CallFromContext(captured)
	require.True(t, ok)
	require.Equal(t, session, call.SessionID)
	return captured
}

// stepInstance is an instance whose first call waits for the test and then
// fails as told; later calls answer the instance's number.
type stepInstance struct {
	n       int
	entered chan struct{} // closed when the first call has begun
	finish  chan error    // the first call's error
	first   atomic.Bool
	closes  atomic.Int32
}

func (i *stepInstance) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	if i.finish != nil && i.first.CompareAndSwap(false, true) {
		close(i.entered)
		select {
		case err := <-i.finish:
			return "", err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return strconv.Itoa(i.n), nil
}

func (i *stepInstance) close() error { i.closes.Add(1); return nil }

func (i *stepInstance) pid() int { return 0 }

// A call whose instance broke ends that instance only: when the
// conversation got a newer instance meanwhile (another call saw the loss,
// or the host closed the conversation), the newer one keeps running. Both
// the loss during the call and the loss found before the request went out
// (after which the call is made again) are checked.
func TestConversationCallEndsOnlyItsInstance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantOut string // what the broken call returns in the end
	}{
		{"lost during the call", fmt.Errorf("%w: the server exited", errLost), ""},
		{"lost before the request", fmt.Errorf("%w: %w: the server exited", errNotSent, errLost), "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			var mu sync.Mutex
			var insts []*stepInstance
			broken := &stepInstance{n: 1, entered: make(chan struct{}), finish: make(chan error, 1)}
			start := func(context.Context) (instance, error) {
				mu.Lock()
				defer mu.Unlock()
				inst := broken
				if len(insts) > 0 {
					inst = &stepInstance{n: len(insts) + 1}
				}
				insts = append(insts, inst)
				return inst, nil
			}
			e := &serverEntry{
				cfg: &expanded{ServerConfig: ServerConfig{Name: "sandboxed", Command: "unused", Isolation: IsolationPerConversation}},
				log: slog.New(slog.DiscardHandler),
			}
			e.sb = newSandboxes(start, 8, 0)
			t.Cleanup(func() { _ = e.sb.close() })
			ctx, cancel := context.WithTimeout(sessionContext(t, "x"), 20*time.Second)
			defer cancel()

			type reply struct {
				out string
				err error
			}
			first := make(chan reply, 1)
			go func() {
				out, err := e.call(ctx, "tool", nil, nil)
				first <- reply{out, err}
			}()
			select {
			case <-broken.entered:
			case <-ctx.Done():
				t.Fatal("the first call never began")
			}
			// Meanwhile the conversation's instance is replaced.
			require.NoError(t, e.sb.closeConversation("x"))
			out, err := e.call(ctx, "tool", nil, nil)
			require.NoError(t, err)
			require.Equal(t, "2", out, "a fresh instance")

			broken.finish <- tc.err
			var r reply
			select {
			case r = <-first:
			case <-ctx.Done():
				t.Fatal("the first call never returned")
			}
			assert.Equal(t, tc.wantOut, r.out)
			if tc.wantOut == "" {
				assert.ErrorIs(t, r.err, errLost)
			} else {
				assert.NoError(t, r.err)
			}

			mu.Lock()
			second := insts[1]
			started := len(insts)
			mu.Unlock()
			assert.Zero(t, second.closes.Load(), "the newer instance was ended")
			out, err = e.call(ctx, "tool", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, "2", out, "the conversation still runs on the newer instance")
			assert.Equal(t, 2, started, "instances started")
		})
	}
}
