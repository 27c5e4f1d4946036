package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DefaultSummaryThreshold is the number of active messages at which a
// [Summarizer] with no Threshold summarises.
const DefaultSummaryThreshold = 20

// ErrEmptySummary is returned (wrapped) by [Summarizer.MaybeSummarize] when
// the model returns an empty summary.
var ErrEmptySummary = errors.New("memory: model returned an empty summary")

// SummaryModel writes the summary of a run of messages, usually by asking a
// language model. It must not keep msgs. Summarize may be called from
// several goroutines at once for different sessions.
type SummaryModel interface {
	Summarize(ctx context.Context, msgs []Message) (string, error)
}

// SummaryModelFunc adapts a function to [SummaryModel].
type SummaryModelFunc func(ctx context.Context, msgs []Message) (string, error)

// Summarize calls f(ctx, msgs).
func (f SummaryModelFunc) Summarize(ctx context.Context, msgs []Message) (string, error) {
	return f(ctx, msgs)
}

// Summarizer moves the oldest part of long sessions into long-term memory.
// Its zero Threshold means [DefaultSummaryThreshold].
//
// A Summarizer holds no state of its own: it is safe for concurrent use for
// different sessions. Calls for one session should not overlap: the store
// never archives a message twice, but two overlapping calls may both ask
// the model, and the second then fails or summarises a smaller range.
type Summarizer struct {
	// Store holds the sessions.
	Store Store
	// Model writes the summaries.
	Model SummaryModel
	// Threshold is the number of active messages at which MaybeSummarize
	// summarises; zero means DefaultSummaryThreshold.
	Threshold int
}

// MaybeSummarize summarises the oldest half of a session's active messages
// when the session holds at least Threshold of them, and reports whether it
// did.
//
// The cut lies at half the active messages, moved earlier so that it never
// separates an assistant message with tool calls from its tool messages
// (or later, up to the current turn, when moving earlier would leave
// nothing), and never reaches into the current turn (see [CurrentTurn]).
// The model's summary is stored with [Store.Summarize], which archives the
// messages: they leave the context and later summaries, but stay readable
// with Messages(ctx, id, true).
//
// A model error is returned wrapped and leaves the session untouched, as
// does an empty summary ([ErrEmptySummary]). An unknown session is an error
// wrapping [ErrNotFound].
func (s *Summarizer) MaybeSummarize(ctx context.Context, sessionID string) (Summary, bool, error) {
	if s.Store == nil || s.Model == nil {
		return Summary{}, false, errors.New("memory: Summarizer needs a Store and a Model")
	}
	threshold := s.Threshold
	if threshold <= 0 {
		threshold = DefaultSummaryThreshold
	}
	active, err := s.Store.Messages(ctx, sessionID, false)
	if err != nil {
		return Summary{}, false, err
	}
	if len(active) < threshold {
		return Summary{}, false, nil
	}
	n := summaryCut(active)
	if n == 0 {
		return Summary{}, false, nil
	}
	text, err := s.Model.Summarize(ctx, CloneMessages(active[:n]))
	if err != nil {
		return Summary{}, false, fmt.Errorf("memory: summarize %q: model: %w", sessionID, err)
	}
	if strings.TrimSpace(text) == "" {
		return Summary{}, false, fmt.Errorf("memory: summarize %q: %w", sessionID, ErrEmptySummary)
	}
	sum, err := s.Store.Summarize(ctx, sessionID, Summary{Content: text, FirstID: active[0].ID, LastID: active[n-1].ID})
	if err != nil {
		return Summary{}, false, err
	}
	return sum, true, nil
}

// summaryCut returns how many of the oldest active messages to summarise.
func summaryCut(active []Message) int {
	turn := CurrentTurn(active)
	if turn == 0 && (len(active) == 0 || active[0].Role != RoleUser || active[0].Hook) {
		turn = len(active) // no user turn: nothing to protect
	}
	half := min(len(active)/2, turn)
	// Earlier: never start the kept part with a tool message.
	n := half
	for n > 0 && n < len(active) && active[n].Role == RoleTool {
		n--
	}
	if n > 0 {
		return n
	}
	// Later, up to the current turn.
	n = half
	for n < turn && active[n].Role == RoleTool {
		n++
	}
	return n
}
