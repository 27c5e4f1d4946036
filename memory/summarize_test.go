package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

// recordModel is a SummaryModel that remembers what it was asked.
type recordModel struct {
	got  []memory.Message
	text string
	err  error
}

func (m *recordModel) Summarize(_ context.Context, msgs []memory.Message) (string, error) {
	m.got = msgs
	return m.text, m.err
}

// conversation returns n messages: pairs of user question and assistant
// answer, with the pattern overridden at the given indices.
func conversation(n int, override map[int]memory.Message) []memory.Message {
	out := make([]memory.Message, n)
	for i := range out {
		if m, ok := override[i]; ok {
			out[i] = m
		} else if i%2 == 0 {
			out[i] = userMsg(fmt.Sprint("q", i))
		} else {
			out[i] = asst(fmt.Sprint("a", i))
		}
	}
	return out
}

func TestMaybeSummarize(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []memory.Message
		threshold int
		wantN     int // messages summarised; 0 = none
	}{
		{"below threshold", conversation(19, nil), 0, 0},
		{"at default threshold", conversation(20, nil), 0, 10},
		{"custom threshold", conversation(6, nil), 6, 3},
		{"cut moves before tool calls", conversation(20, map[int]memory.Message{
			9: asst("", call("a", "f", "{}")), 10: toolMsg("a", "r"), 11: toolMsg("a", "r2"),
		}), 0, 9},
		{"cut never reaches the current turn", conversation(20, map[int]memory.Message{
			2: userMsg("latest"), 4: asst("x"), 6: asst("x"), 8: asst("x"), 10: asst("x"), 12: asst("x"), 14: asst("x"), 16: asst("x"), 18: asst("x"),
		}), 0, 2},
		{"whole list is the current turn", append([]memory.Message{userMsg("only")}, conversation(20, map[int]memory.Message{
			0: asst("x"), 2: asst("x"), 4: asst("x"), 6: asst("x"), 8: asst("x"), 10: asst("x"), 12: asst("x"), 14: asst("x"), 16: asst("x"), 18: asst("x"),
		})...), 0, 0},
		{"cut moves after tool calls when before leaves nothing", append([]memory.Message{asst("", call("a", "f", "{}"))}, conversation(20, map[int]memory.Message{
			0: toolMsg("a", "1"), 1: toolMsg("a", "2"), 2: toolMsg("a", "3"), 3: toolMsg("a", "4"), 4: toolMsg("a", "5"), 5: toolMsg("a", "6"), 6: toolMsg("a", "7"), 7: toolMsg("a", "8"), 8: toolMsg("a", "9"), 9: toolMsg("a", "10"), 10: toolMsg("a", "11"),
		})...), 0, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			st := new(memory.MemStore)
			_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
			require.NoError(t, err)
			stored, err := st.Append(ctx, "s", tt.msgs...)
			require.NoError(t, err)
			model := &recordModel{text: "summary"}
			s := memory.Summarizer{Store: st, Model: model, Threshold: tt.threshold}

			sum, did, err := s.MaybeSummarize(ctx, "s")
			require.NoError(t, err)
			if got := len(model.got); got != tt.wantN || did != (tt.wantN > 0) {
				t.Fatalf("summarised %d messages (did=%v), want %d", got, did, tt.wantN)
			}
			active, err := st.Messages(ctx, "s", false)
			require.NoError(t, err)
			all, err := st.Messages(ctx, "s", true)
			require.NoError(t, err)
			assert.Len(t, active, len(tt.msgs)-tt.wantN)
			assert.Len(t, all, len(tt.msgs), "archived messages must stay readable")
			if tt.wantN == 0 {
				return
			}
			assert.Equal(t, stored[0].ID, sum.FirstID)
			assert.Equal(t, stored[tt.wantN-1].ID, sum.LastID)
			assert.NotZero(t, sum.ID)
			for i, m := range all {
				if want := i < tt.wantN; m.Archived() != want || (want && m.SummaryID != sum.ID) {
					t.Errorf("message %d: SummaryID %d, want archived=%v into %d", i, m.SummaryID, want, sum.ID)
				}
			}
			assert.NotEqual(t, memory.RoleTool, active[0].Role, "kept part starts with a tool message")
		})
	}
}

func TestMaybeSummarizeFailures(t *testing.T) {
	boom := errors.New("model down")
	tests := []struct {
		name    string
		model   memory.SummaryModel
		wantErr error
	}{
		{"model error", memory.SummaryModelFunc(func(context.Context, []memory.Message) (string, error) { return "", boom }), boom},
		{"empty summary", memory.SummaryModelFunc(func(context.Context, []memory.Message) (string, error) { return " \n", nil }), memory.ErrEmptySummary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			st := new(memory.MemStore)
			_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
			require.NoError(t, err)
			_, err = st.Append(ctx, "s", conversation(20, nil)...)
			require.NoError(t, err)
			s := memory.Summarizer{Store: st, Model: tt.model}
			_, did, err := s.MaybeSummarize(ctx, "s")
			assert.ErrorIs(t, err, tt.wantErr)
			assert.False(t, did)
			active, _ := st.Messages(ctx, "s", false)
			sums, _ := st.Summaries(ctx, "s")
			assert.Len(t, active, 20, "session must be untouched")
			assert.Empty(t, sums)
		})
	}
	t.Run("unknown session", func(t *testing.T) {
		s := memory.Summarizer{Store: new(memory.MemStore), Model: &recordModel{text: "x"}}
		_, _, err := s.MaybeSummarize(t.Context(), "nope")
		assert.ErrorIs(t, err, memory.ErrNotFound)
	})
	t.Run("not configured", func(t *testing.T) {
		_, _, err := (&memory.Summarizer{}).MaybeSummarize(t.Context(), "s")
		assert.Error(t, err)
	})
}

// TestSummarizeRepeatedly checks that archived messages leave later
// summaries: each round summarises only what is still active.
func TestSummarizeRepeatedly(t *testing.T) {
	ctx := t.Context()
	st := openSQLite(t, t.TempDir()+"/db.sqlite")
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	model := &recordModel{text: "s"}
	s := memory.Summarizer{Store: st, Model: model, Threshold: 8}
	for round := range 5 {
		_, err := st.Append(ctx, "s", userMsg(fmt.Sprint("q", round)), asst(fmt.Sprint("a", round)),
			userMsg(fmt.Sprint("q", round, "b")), asst(fmt.Sprint("a", round, "b")))
		require.NoError(t, err)
		model.got = nil
		_, _, err = s.MaybeSummarize(ctx, "s")
		require.NoError(t, err)
		for _, m := range model.got {
			assert.False(t, m.Archived(), "round %d: model saw archived message %q", round, m.Content)
			assert.False(t, strings.Contains(m.Content, "summary"))
		}
	}
	all, err := st.Messages(ctx, "s", true)
	require.NoError(t, err)
	sums, err := st.Summaries(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, all, 20)
	assert.NotEmpty(t, sums)
	for i := 1; i < len(sums); i++ {
		assert.Greater(t, sums[i].FirstID, sums[i-1].LastID, "summaries overlap")
	}
}
