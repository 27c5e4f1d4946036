package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// outcomeStores are the stores the web chat keeps conversations in: the
// default MemStore, SQLite (-db) and PostgreSQL (-postgres).
func outcomeStores() map[string]func(t *testing.T) memory.Store {
	return map[string]func(t *testing.T) memory.Store{
		"memory": func(t *testing.T) memory.Store { return &memory.MemStore{} },
		"sqlite": func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "chat.db")) },
		"postgres": func(t *testing.T) memory.Store {
			url := postgresURL(t)
			st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(freshSchema(t, url)))
			require.NoError(t, err)
			t.Cleanup(st.Close)
			return st
		},
	}
}

// TestEditedArgumentsInTheHistory: a card approved over POST
// /api/tool-approve with edited arguments runs the tool with them, and the
// stored history, as GET /api/history returns it, holds the edit, not
// what the model wrote, with the call's outcome; a rejected call's tool
// message says it was rejected, and by whom. On every store the web chat
// runs on.
func TestEditedArgumentsInTheHistory(t *testing.T) {
	for name, newStore := range outcomeStores() {
		t.Run(name, func(t *testing.T) {
			leaktest.Check(t)
			st := newStore(t)
			h := newHarness(t, Options{Store: st})
			s := h.newSession(t)
			ev, _ := h.openEvents(t, s)

			h.chat(t, s, "What's the weather in Paris?")
			call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
			assert.JSONEq(t, `{"city":"Paris"}`, string(call.Arguments))
			status, out := h.post(t, "/api/tool-approve", approveBody(s, call, true, map[string]any{"arguments": map[string]string{"city": "Rome"}}))
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, true, out["success"], "%v", out)
			done, chunks := ev.runDone(t)
			require.Equal(t, "finished", done.Status, "%+v", done)
			var result string
			for _, c := range chunks {
				if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
					result = c.Tool.Result
					assert.JSONEq(t, `{"city":"Rome"}`, string(c.Tool.Arguments))
				}
			}
			require.Contains(t, result, "Rome", "the tool ran with the edit")

			h.chat(t, s, "Run `ls -la`")
			call, _ = ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
			h.decide(t, s, call, false)
			done, _ = ev.runDone(t)
			require.Equal(t, "rejected", done.Status, "%+v", done)

			hist, _, _ := historyAt(t, h.client, h.ts.URL, s)
			var calls []memory.ToolCall
			var tools []memory.Message
			for _, e := range hist {
				calls = append(calls, e.ToolCalls...)
				if e.Role == memory.RoleTool {
					tools = append(tools, e.Message)
				}
			}
			require.Len(t, calls, 2, "%+v", hist)
			require.Len(t, tools, 2, "%+v", hist)
			assert.JSONEq(t, `{"city":"Rome"}`, string(calls[0].Arguments), "the history says what ran")
			assert.Equal(t, result, tools[0].Content)
			assert.Equal(t, memory.OutcomeResult, tools[0].Outcome)
			assert.Empty(t, tools[0].Cause)
			assert.Equal(t, memory.OutcomeRejected, tools[1].Outcome)
			assert.Equal(t, string(agent.CauseUser), tools[1].Cause)

			// The JSON a page reads.
			resp, err := h.client.Get(h.ts.URL + "/api/history?session_id=" + s)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.True(t, strings.Contains(string(body), `"outcome":"result"`), "%s", body)
			assert.True(t, strings.Contains(string(body), `"outcome":"rejected","cause":"user"`), "%s", body)

			// The store itself, as a replica or a restarted server reads it.
			msgs, err := st.Messages(context.Background(), s, true)
			require.NoError(t, err)
			for _, m := range msgs {
				for _, c := range m.ToolCalls {
					if c.ID == calls[0].ID {
						assert.JSONEq(t, `{"city":"Rome"}`, string(c.Arguments))
					}
				}
			}
		})
	}
}
