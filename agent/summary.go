package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/planround/planround/memory"
)

// SummaryPrompt is the instruction the agent's summary model follows.
const SummaryPrompt = `You write the long-term memory of an assistant. Summarise the conversation transcript the user sends: who the user is and what they want, facts and decisions, results of tool calls that still matter, and open tasks. Be concise and factual, use short paragraphs or bullet points, and write in the language of the conversation. Do not add anything that is not in the transcript.`

// SummaryModel returns a [memory.SummaryModel] that asks the agent's model
// (same API and model name) to summarise messages. Intent tags are removed
// from the transcript it sends, and images are named, not sent.
func (a *Agent) SummaryModel() memory.SummaryModel {
	return memory.SummaryModelFunc(a.summarize)
}

func (a *Agent) summarize(ctx context.Context, msgs []memory.Message) (string, error) {
	var tr strings.Builder
	for _, m := range msgs {
		switch {
		case m.Role == memory.RoleTool:
			fmt.Fprintf(&tr, "tool result (%s): %s\n", m.Name, m.Content)
		case len(m.ToolCalls) > 0:
			if c := a.cfg.Intents.Strip(m.Content); c != "" {
				fmt.Fprintf(&tr, "assistant: %s\n", c)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&tr, "assistant called %s(%s)\n", c.Name, c.Arguments)
			}
		default:
			fmt.Fprintf(&tr, "%s: %s\n", m.Role, a.cfg.Intents.Strip(m.Content))
			for _, img := range m.Images {
				fmt.Fprintf(&tr, "%s sent an image: %s\n", m.Role, img)
			}
		}
	}
	settings := a.cfg.Settings
	settings.ResponseFormat = nil // a summary is prose
	rd, resp, err := a.model.open(ctx, request{messages: []memory.Message{
		{Role: memory.RoleSystem, Content: SummaryPrompt},
		{Role: memory.RoleUser, Content: tr.String()},
	}, settings: settings})
	if err != nil {
		return "", fmt.Errorf("agent: summary request failed: %w", err)
	}
	complete := false
	defer func() { closeBody(resp.Body, complete) }()
	var out strings.Builder
	for {
		d, err := rd.Next()
		if errors.Is(err, io.EOF) {
			complete = true
			return strings.TrimSpace(out.String()), nil
		}
		if err != nil {
			return "", fmt.Errorf("agent: reading summary: %w", streamError(err, resp))
		}
		out.WriteString(d.Content)
	}
}

// maybeSummarize runs after a turn was persisted, with the run's context. A
// failure leaves the session as it was; it is logged and shown as a warning
// chunk. Cancelling the run's context abandons the summary: the run ends with
// an interrupted chunk.
func (r *run) maybeSummarize() {
	if r.a.cfg.SummarizeAt <= 0 {
		return
	}
	ctx := r.ctx
	s := memory.Summarizer{Store: r.a.cfg.Store, Model: r.a.SummaryModel(), Threshold: r.a.cfg.SummarizeAt}
	sum, done, err := s.MaybeSummarize(ctx, r.t.in.SessionID)
	if err != nil && ctx.Err() != nil {
		r.obs.logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "summarisation interrupted", slog.String("session", r.t.in.SessionID))
		r.emit(Chunk{Kind: KindInterrupted, Round: r.round})
		return
	}
	if err != nil {
		r.obs.logger.LogAttrs(ctx, slog.LevelWarn, "summarisation failed", slog.String("session", r.t.in.SessionID), slog.Any("error", err))
		r.emit(Chunk{Kind: KindWarning, Round: r.round, Code: WarnSummaryFailed, Text: "summarisation failed: " + err.Error()})
		return
	}
	if done {
		r.obs.logger.LogAttrs(ctx, slog.LevelInfo, "session summarised", slog.String("session", r.t.in.SessionID),
			slog.Int64("summary", sum.ID), slog.Int64("first", sum.FirstID), slog.Int64("last", sum.LastID))
	}
}
