package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// SummaryPrompt is the instruction the agent's summary model follows.
const SummaryPrompt = `You write the long-term memory of an assistant. Summarise the conversation transcript the user sends: who the user is and what they want, facts and decisions, results of tool calls that still matter, and open tasks. Be concise and factual, use short paragraphs or bullet points, and write in the language of the conversation. Do not add anything that is not in the transcript.`

// SummaryModel returns a [memory.SummaryModel] that asks the agent's model
// (same API and model name) to summarise messages. Intent tags are removed
// from the transcript it sends, and images are named, not sent. Each
// request is a model call like a round's: a chat span with
// planround.summary, its metrics, and a "model call" record of
// Config.Logger with summary set.
func (a *Agent) SummaryModel() memory.SummaryModel {
	return memory.SummaryModelFunc(func(ctx context.Context, msgs []memory.Message) (string, error) {
		return a.summarize(ctx, &a.obs, "", 0, msgs)
	})
}

// summarize asks the model for a summary of msgs, recorded with obs as a
// model call of the session sessionID ("" when it is not known) in the
// run's round round.
func (a *Agent) summarize(ctx context.Context, obs *observer, sessionID string, round int, msgs []memory.Message) (string, error) {
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
	req := request{messages: []memory.Message{
		{Role: memory.RoleSystem, Content: SummaryPrompt},
		{Role: memory.RoleUser, Content: tr.String()},
	}, settings: settings}

	start := time.Now()
	tel := obs.tel
	sctx, ct := tel.startSummary(ctx, sessionID, req)
	sctx, body := obs.api.withSentBody(sctx)
	var out summaryOutput
	err := a.readSummary(sctx, tel, ct, req, &out)
	if obs.api.log != nil {
		e := apiCallEnd{sessionID: sessionID, round: round, purpose: memory.PurposeSummary, body: body,
			finish: out.finish, usage: out.usage, err: err, ct: ct}
		if obs.api.content {
			e.text = out.text.String()
		}
		obs.api.record(ctx, obs.logger, a.cfg.Model, e)
	}

	// The call is recorded as a round's is (logCall, endChat).
	var failure error
	outcome := "ok"
	switch {
	case ctx.Err() != nil:
		outcome = "interrupted"
	case err != nil:
		outcome, failure = "error", err
	}
	attrs := []slog.Attr{
		slog.String("session", sessionID),
		slog.Bool("summary", true),
		slog.String("model", a.cfg.Model),
		slog.Duration("latency", time.Since(start)),
		slog.String("outcome", outcome),
		slog.String("finish_reason", out.finish),
	}
	if out.usage != nil {
		attrs = append(attrs,
			slog.Int64("prompt_tokens", out.usage.PromptTokens),
			slog.Int64("completion_tokens", out.usage.CompletionTokens))
	}
	level := slog.LevelInfo
	if failure != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.Any("error", failure))
	}
	obs.logger.LogAttrs(ctx, level, "model call", attrs...)
	tel.measure(context.WithoutCancel(ctx), ct, out.usage, failure)
	if tel.content && ct.span.IsRecording() {
		ct.span.SetAttributes(keyOutput.String(tel.bound(outputJSON(out.text.String(), nil, out.finish))))
	}
	ct.end(out.usage, out.finish, failure, err != nil)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out.text.String()), nil
}

// summaryOutput is what a summary request's response brought.
type summaryOutput struct {
	text   strings.Builder
	usage  *stream.Usage
	finish string
}

// readSummary sends the summary request req with ctx (carrying its chat
// span ct) and reads the response into out.
func (a *Agent) readSummary(ctx context.Context, tel *telemetry, ct *chatTel, req request, out *summaryOutput) error {
	if err := a.cfg.RequestLimit.acquire(ctx, tel); err != nil {
		return fmt.Errorf("agent: summary request not sent: waiting for a slot of the request limit: %w", err)
	}
	defer a.cfg.RequestLimit.release()
	st, err := a.model.open(ctx, req)
	if err != nil {
		return fmt.Errorf("agent: summary request failed: %w", err)
	}
	complete := false
	defer func() { st.close(complete) }()
	for {
		d, err := st.next()
		if errors.Is(err, io.EOF) {
			complete = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("agent: reading summary: %w", err)
		}
		if ct.first && d.Content != "" {
			ct.firstToken()
		}
		out.text.WriteString(d.Content)
		if d.FinishReason != "" {
			out.finish = d.FinishReason
		}
		if d.Usage != nil {
			u := *d.Usage
			out.usage = &u
		}
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
	model := memory.SummaryModelFunc(func(ctx context.Context, msgs []memory.Message) (string, error) {
		return r.a.summarize(ctx, r.obs, r.t.in.SessionID, r.round, msgs)
	})
	s := memory.Summarizer{Store: r.a.cfg.Store, Model: model, Threshold: r.a.cfg.SummarizeAt}
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
