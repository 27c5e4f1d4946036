package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

func TestStoreKeepsTheConversation(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			srv := newServer(t)
			srv.Enqueue(
				planNeedTool(),
				agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
				agenttest.Reply().Text("Sunny in Lima.").Finish("stop"),
				planNoTool(),
				agenttest.Reply().Text("You asked about Lima.").Finish("stop"),
			)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st }, weatherTool())
			ctx := context.Background()
			_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}))
			require.NoError(t, err)
			_, err = collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "What did I ask?"}))
			require.NoError(t, err)

			msgs, err := st.Messages(ctx, "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			var contents []string
			for _, m := range msgs {
				contents = append(contents, string(m.Role)+":"+m.Content)
			}
			assert.Equal(t, []string{
				"user:Weather in Lima?",
				"assistant:Let me look that up. <need_tool>",
				"assistant:",
				"tool:sunny in Lima",
				"assistant:Sunny in Lima.",
				"user:What did I ask?",
				"assistant:Hello! I can answer that.<no_tool>",
				"assistant:You asked about Lima.",
			}, contents)

			// The second turn's planning request carried the first turn.
			plan2 := srv.Requests()[3]
			var sent []string
			for _, m := range plan2.Messages {
				sent = append(sent, m.Role+":"+m.Content)
			}
			assert.Contains(t, sent, "tool:sunny in Lima")
			assert.Contains(t, sent, "assistant:Let me look that up. <need_tool>", "the planning round sees earlier tags")
		})
	}
}

func TestStorePersistsInterruptedTurn(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.Approver = personFunc(func(ctx context.Context, _ agent.ApprovalRequest) (agent.Decision, error) {
			cancel()
			<-ctx.Done()
			return agent.Decision{}, ctx.Err()
		})
	}, weatherTool())
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "go"}))
	require.NoError(t, err)
	msgs, err := st.Messages(context.Background(), "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
	require.NotEmpty(t, msgs)
	assert.Equal(t, agent.CauseApprovalInterrupted.DefaultReason(), msgs[len(msgs)-1].Content)
}

func TestOldToolResultsAreTruncatedInRequests(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	long := strings.Repeat("x", 1000)
	history := []memory.Message{
		{Role: memory.RoleUser, Content: "before"},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{}`)}, {ID: "c2", Name: "get_skill", Arguments: json.RawMessage(`{}`)}}},
		{Role: memory.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: long},
		{Role: memory.RoleTool, ToolCallID: "c2", Name: "get_skill", Content: long},
		{Role: memory.RoleAssistant, Content: "done"},
	}
	skill := agent.FuncTool{Def: agent.ToolDefinition{Name: "get_skill", SkipApproval: true, NoTruncate: true}}
	a := newAgent(t, srv, nil, weatherTool(), skill)
	_, err := collect(a.Run(context.Background(), agent.Input{History: history, Message: "now"}))
	require.NoError(t, err)
	msgs := srv.Requests()[0].Messages
	assert.Less(t, len(msgs[2].Content), 400, "old tool result truncated")
	assert.Contains(t, msgs[2].Content, "truncated")
	assert.Equal(t, long, msgs[3].Content, "NoTruncate tools are kept whole")
}

func TestSummarizeAtMovesOldMessagesToSummary(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	ctx := context.Background()
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.SummarizeAt = 6 })
	for i := range 2 {
		srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
		if i == 1 {
			srv.Enqueue(agenttest.Reply().Text("The user said hello twice.").Finish("stop"))
		}
		_, err := collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "hello"}))
		require.NoError(t, err)
	}
	sums, err := st.Summaries(ctx, "s")
	require.NoError(t, err)
	require.Len(t, sums, 1)
	assert.Equal(t, "The user said hello twice.", sums[0].Content)
	all, err := st.Messages(ctx, "s", true)
	require.NoError(t, err)
	active, err := st.Messages(ctx, "s", false)
	require.NoError(t, err)
	assert.Len(t, all, 6)
	assert.Less(t, len(active), 6)

	// The next run sees the summary as a system block.
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	_, err = collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "again"}))
	require.NoError(t, err)
	reqs := srv.Requests()
	var sawSummary bool
	for _, m := range reqs[len(reqs)-2].Messages {
		if m.Role == "system" && strings.Contains(m.Content, "The user said hello twice.") {
			sawSummary = true
		}
	}
	assert.True(t, sawSummary)
}

func TestSummaryFailureIsAWarning(t *testing.T) {
	st := &memory.MemStore{}
	srv := newServer(t)
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.SummarizeAt = 5 })
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"), agenttest.HTTPError(500, "summary down"))
	chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	last := chunks[len(chunks)-1]
	assert.Equal(t, agent.KindWarning, last.Kind)
	assert.Equal(t, agent.WarnSummaryFailed, last.Code)
	assert.Contains(t, last.Text, "summarisation failed")
	msgs, err := st.Messages(context.Background(), "s", true)
	require.NoError(t, err)
	assert.Len(t, msgs, 6, "nothing archived or lost")
	for _, m := range msgs {
		assert.False(t, m.Archived())
	}
}

// TestInterruptDuringSummaryEndsTheRun: the summary request at the end of a
// run is part of the run: cancelling ctx while it streams ends it with
// interrupted, and the session is left as it was.
func TestInterruptDuringSummaryEndsTheRun(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.SummarizeAt = 5 })
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"))
	_, err := collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "hello"}))
	require.NoError(t, err)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("answer").Finish("stop"),
		// The summary never ends by itself; the user presses stop once it
		// has begun.
		agenttest.Reply().Text("The user ", "said hello.").Finish("stop").HoldAfter(1).OnFlush(func(int) { cancel() }))

	type result struct {
		chunks []agent.Chunk
		err    error
	}
	done := make(chan result, 1)
	go func() {
		chunks, err := collect(a.Run(ctx, agent.Input{SessionID: "s", Message: "hello"}))
		done <- result{chunks, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		srv.Close() // let the run go, then fail
		<-done
		t.Fatal("the run did not end when its context was cancelled during the summary")
	}
	require.NoError(t, res.err)
	assert.Equal(t, agent.KindInterrupted, res.chunks[len(res.chunks)-1].Kind)
	sums, err := st.Summaries(context.Background(), "s")
	require.NoError(t, err)
	assert.Empty(t, sums)
	msgs, err := st.Messages(context.Background(), "s", false)
	require.NoError(t, err)
	assert.Len(t, msgs, 6, "the turn is kept, nothing archived")
}

// TestNothingAfterInterrupted: a run that a rejection ended with
// interrupted yields nothing after it, also when the summary that follows
// fails.
func TestNothingAfterInterrupted(t *testing.T) {
	st := &memory.MemStore{}
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Oslo"}`).Finish("tool_calls"),
		agenttest.HTTPError(500, "summary down"))
	a := newAgent(t, srv, func(c *agent.Config) {
		c.Store = st
		c.SummarizeAt = 5
		c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
			return agent.Decision{Reason: "no"}, nil
		})
	}, weatherTool())
	_, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hi"}))
	require.NoError(t, err)
	chunks, err := collect(a.Run(context.Background(), agent.Input{SessionID: "s", Message: "go"}))
	require.NoError(t, err)
	assert.Equal(t, agent.KindInterrupted, chunks[len(chunks)-1].Kind, "%v", trace(chunks))
}

// TestSummarizeAtWithoutSession: an agent with a Store and SummarizeAt also
// answers a turn that has no session (Input.History).
func TestSummarizeAtWithoutSession(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = &memory.MemStore{}; c.SummarizeAt = 4 })
	chunks, err := collect(a.Run(context.Background(), agent.Input{Message: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
}

// TestRunWithCancelledContext: a run whose context is already done yields
// interrupted and nil, like a run interrupted later, with or without a Store;
// it sends nothing and adds nothing to the conversation.
func TestRunWithCancelledContext(t *testing.T) {
	for name, st := range map[string]memory.Store{"no store": nil, "store": &memory.MemStore{}} {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st })
			turn := a.NewTurn(agent.Input{SessionID: "s", Message: "hi"})
			chunks, err := collect(turn.Run(ctx))
			require.NoError(t, err)
			assert.Equal(t, []string{"interrupted"}, trace(chunks))
			assert.Empty(t, srv.Requests())
			assert.Empty(t, turn.Messages())
			if st != nil {
				_, err := st.Session(context.Background(), "s")
				assert.ErrorIs(t, err, memory.ErrNotFound)
			}
		})
	}
}

// appendFails is a Store whose Append fails from its call number from on
// (1 is the first).
type appendFails struct {
	memory.MemStore
	from  int
	calls int
}

func (s *appendFails) Append(ctx context.Context, id string, msgs ...memory.Message) ([]memory.Message, error) {
	if s.calls++; s.calls >= s.from {
		return nil, errors.New("disk full")
	}
	return s.MemStore.Append(ctx, id, msgs...)
}

// TestStoreAppendFails: a turn whose user message cannot be saved when it
// starts fails at once: no chunk, no model request, nothing added.
func TestStoreAppendFails(t *testing.T) {
	leaktest.Check(t)
	srv := newServer(t)
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = &appendFails{from: 1} })
	turn := a.NewTurn(agent.Input{SessionID: "s", Message: "hi"})
	chunks, err := collect(turn.Run(context.Background()))
	assert.ErrorContains(t, err, "disk full")
	assert.ErrorContains(t, err, "user message")
	assert.Empty(t, chunks)
	assert.Empty(t, srv.Requests())
	assert.Empty(t, turn.Messages())
}

// TestStoreAppendFailsAtTheEnd: a turn whose round cannot be saved when it
// ends (before its round_end is shown) ends with the store's error as the
// last pair, once; a consumer that broke out is not called again (a late
// yield would panic).
func TestStoreAppendFailsAtTheEnd(t *testing.T) {
	script := func(srv *agenttest.Server) {
		srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	}
	srv := newServer(t)
	script(srv)
	st := &appendFails{from: 2}
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st })
	var errs []error
	var chunks []agent.Chunk
	for c, err := range a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hi"}) {
		if err != nil {
			errs = append(errs, err)
			assert.Equal(t, agent.KindInvalid, c.Kind)
			continue
		}
		chunks = append(chunks, c)
	}
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "disk full")
	assert.Equal(t, []string{"text"}, trace(chunks), "no round_end for a round that was not saved")
	msgs, err := st.MemStore.Messages(context.Background(), "s", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"user:hi"}, contents(msgs), "the user message saved at the start is kept")

	for n := 1; n <= len(chunks); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			leaktest.Check(t)
			srv := newServer(t)
			script(srv)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = &appendFails{from: 2} })
			got := 0
			for _, err := range a.Run(context.Background(), agent.Input{SessionID: "s", Message: "hi"}) {
				require.NoError(t, err)
				if got++; got == n {
					break
				}
			}
		})
	}
}

// TestUserMessageSavedWhenTurnStarts: with a Store, the user's message is
// saved before the first model request, and each round when it ends (a
// round with calls before its first approval, with the calls open), so a
// process that dies in the middle of the turn (here: a second handle on the
// same SQLite file looks while the run is blocked) has kept them. The rest
// of the turn is appended without a second copy of anything.
func TestUserMessageSavedWhenTurnStarts(t *testing.T) {
	tests := []struct {
		name   string
		script []agenttest.Response
		// stopAt, when set, says at which chunk to look at the file and
		// then interrupt the run.
		stopAt func(c agent.Chunk) bool
		look   bool // look from inside the Approver, then approve
		during []string
		want   []string
	}{
		{"mid-stream", []agenttest.Response{agenttest.Reply().Text("Thinking ", "about ", "it").Finish("stop").HoldAfter(1)},
			func(c agent.Chunk) bool { return c.Kind == agent.KindText }, false,
			[]string{"user:Weather in Lima?"},
			[]string{"user:Weather in Lima?", "assistant:Thinking "}},
		{"at an approval", []agenttest.Response{
			planNeedTool(),
			agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls"),
			agenttest.Reply().Text("Sunny in Lima.").Finish("stop"),
		}, nil, true,
			[]string{"user:Weather in Lima?", "assistant:Let me look that up. <need_tool>", "assistant:"},
			[]string{"user:Weather in Lima?", "assistant:Let me look that up. <need_tool>", "assistant:", "tool:sunny in Lima", "assistant:Sunny in Lima."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			path := filepath.Join(t.TempDir(), "chat.db")
			st, err := sqlitestore.Open(context.Background(), path)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })

			// look opens the file as another process would after a crash.
			looked := false
			look := func() {
				looked = true
				other, err := sqlitestore.Open(context.Background(), path)
				require.NoError(t, err)
				defer other.Close()
				msgs, err := other.Messages(context.Background(), "s1", false)
				require.NoError(t, err)
				assert.Equal(t, tt.during, contents(msgs), "what the turn did so far is kept while it runs")
				if last := msgs[len(msgs)-1]; len(last.ToolCalls) > 0 {
					// The open call waits for its approval: recorded as open,
					// not answered.
					log, ok := any(other).(memory.CallLog)
					require.True(t, ok, "the SQLite store keeps open calls")
					calls, err := log.OpenCalls(context.Background(), "s1")
					require.NoError(t, err)
					require.Len(t, calls, 1)
					assert.Equal(t, last.ToolCalls[0].ID, calls[0].CallID)
					assert.Equal(t, last.ID, calls[0].MessageID)
					msgs = msgs[:len(msgs)-1]
				}
				validHistory(t, msgs)
			}

			srv := newServer(t)
			srv.Enqueue(tt.script...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a := newAgent(t, srv, func(c *agent.Config) {
				c.Store = st
				if tt.look {
					c.Approver = personFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
						look()
						return agent.Decision{Approved: true}, nil
					})
				}
			}, weatherTool())
			for c, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Lima?"}) {
				require.NoError(t, err)
				if tt.stopAt != nil && tt.stopAt(c) && !looked {
					look()
					cancel() // the run ends; what it did is appended
				}
			}
			require.True(t, looked)
			msgs, err := st.Messages(context.Background(), "s1", false)
			require.NoError(t, err)
			validHistory(t, msgs)
			assert.Equal(t, tt.want, contents(msgs), "the user message once, then the turn")
		})
	}
}

// TestTurnAfterACrash: a session left by a process that died mid-turn ends
// with the user's message alone; the next turn loads it as valid history and
// the model sees both messages.
func TestTurnAfterACrash(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "chat.db"))
	require.NoError(t, err)
	defer st.Close()
	_, err = st.CreateSession(ctx, memory.Session{ID: "s1"})
	require.NoError(t, err)
	_, err = st.Append(ctx, "s1", memory.Message{Role: memory.RoleUser, Content: "Weather in Lima?"})
	require.NoError(t, err)

	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Sunny.").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st })
	_, err = collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Are you there?"}))
	require.NoError(t, err)

	var sent []string
	for _, m := range srv.Requests()[0].Messages {
		sent = append(sent, m.Role+":"+m.Content)
	}
	if strict {
		// A strict template wants alternating roles: the two user messages
		// are sent as one.
		require.NotEmpty(t, sent)
		assert.True(t, strings.HasPrefix(sent[0], "user:Weather in Lima?\n\nAre you there?"), "%q", sent[0])
	} else {
		assert.Contains(t, sent, "user:Weather in Lima?")
		assert.Contains(t, sent, "user:Are you there?")
	}
	msgs, err := st.Messages(ctx, "s1", false)
	require.NoError(t, err)
	validHistory(t, msgs)
	assert.Equal(t, []string{"user:Weather in Lima?", "user:Are you there?", "assistant:Hello! I can answer that.<no_tool>", "assistant:Sunny."}, contents(msgs))
}

// TestTurnAccepted: Turn.Accepted is closed once the user message is
// stored (a second handle sees it then), before the model is asked; and
// when a run ends without storing it.
func TestTurnAccepted(t *testing.T) {
	leaktest.Check(t)
	st := &memory.MemStore{}
	srv := newServer(t)
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st })
	turn := a.NewTurn(agent.Input{SessionID: "s", Message: "hi"})
	select {
	case <-turn.Accepted():
		t.Fatal("accepted before the run started")
	default:
	}
	seen := false
	for _, err := range turn.Run(context.Background()) {
		require.NoError(t, err)
		if !seen {
			seen = true
			select {
			case <-turn.Accepted():
			default:
				t.Fatal("not accepted at the first chunk")
			}
			msgs, err := st.Messages(context.Background(), "s", false)
			require.NoError(t, err)
			assert.Equal(t, []string{"user:hi"}, contents(msgs))
		}
	}

	// A user message that cannot be stored: closed at the end, with the
	// store's error.
	failing := newAgent(t, srv, func(c *agent.Config) { c.Store = &appendFails{from: 1} })
	turn = failing.NewTurn(agent.Input{SessionID: "s", Message: "hi"})
	_, err := collect(turn.Run(context.Background()))
	require.Error(t, err)
	select {
	case <-turn.Accepted():
	default:
		t.Fatal("not closed after a run that ended")
	}

	// Asked from another goroutine while the run goes, as a host that
	// acknowledges the message does.
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("ok").Finish("stop"))
	turn = a.NewTurn(agent.Input{SessionID: "s2", Message: "hi"})
	got := make(chan struct{})
	go func() {
		defer close(got)
		<-turn.Accepted()
	}()
	_, err = collect(turn.Run(context.Background()))
	require.NoError(t, err)
	<-got
}
