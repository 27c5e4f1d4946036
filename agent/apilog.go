package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/stream"
)

// apiLogger is where an observer writes its API log records
// (Config.APILog); nil log: none are written.
type apiLogger struct {
	log     memory.APILog
	content bool // the request and the reply are kept, not only metadata
}

// bodyKey is the context key of the *sentBody a model request fills.
type bodyKey struct{}

// sentBody receives the body of a model request as it was sent.
type sentBody struct{ b []byte }

// withSentBody returns ctx asking the request sent with it to copy its
// body to the returned sentBody, when the API log keeps content; else ctx
// and nil (no allocation).
func (l apiLogger) withSentBody(ctx context.Context) (context.Context, *sentBody) {
	if l.log == nil || !l.content {
		return ctx, nil
	}
	sb := new(sentBody)
	return context.WithValue(ctx, bodyKey{}, sb), sb
}

// captureBody copies the body of req to the sentBody of its context, if
// any: the exact bytes openai-go sends (the API key is a header, not in
// the body). Called by releaseBody before the request goes out.
func captureBody(req *http.Request) {
	sb, ok := req.Context().Value(bodyKey{}).(*sentBody)
	if !ok || req.GetBody == nil {
		return
	}
	rc, err := req.GetBody()
	if err != nil {
		return
	}
	defer rc.Close()
	sb.b, _ = io.ReadAll(rc)
}

// apiCallEnd is what a model call's record says beyond its request.
type apiCallEnd struct {
	sessionID string
	round     int
	purpose   memory.APICallPurpose
	body      *sentBody
	text      string
	calls     []stream.Call
	finish    string
	usage     *stream.Usage
	err       error
	ct        *chatTel
}

// record appends the record of a model call that ended, with a context
// that outlives ctx's cancellation (an interrupted call is recorded too).
// A store's failure is logged, not returned: the log is for people and
// must not end a run.
func (l apiLogger) record(ctx context.Context, logger *slog.Logger, model string, e apiCallEnd) {
	c := memory.APICall{
		SessionID:    e.sessionID,
		Round:        e.round,
		Model:        model,
		Purpose:      e.purpose,
		FinishReason: e.finish,
		Status:       memory.APICallOK,
		Latency:      time.Since(e.ct.start),
		Started:      e.ct.start,
	}
	if !e.ct.first {
		c.FirstToken = e.ct.firstAt
	}
	if e.usage != nil {
		c.Usage = memory.APIUsage{InputTokens: e.usage.PromptTokens, OutputTokens: e.usage.CompletionTokens}
	}
	if e.err != nil {
		c.Status, c.Error = memory.APICallError, e.err.Error()
	}
	if l.content {
		if e.body != nil && len(e.body.b) > 0 {
			c.Request = validJSON(e.body.b)
		}
		reply := &memory.APIReply{Text: e.text}
		for _, tc := range e.calls {
			reply.ToolCalls = append(reply.ToolCalls, memory.APIToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		c.Reply = reply
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := l.log.AppendAPICall(ctx, c); err != nil {
		logger.LogAttrs(ctx, slog.LevelWarn, "api log append failed", slog.String("session", e.sessionID),
			slog.Int("round", e.round), slog.String("purpose", string(e.purpose)), slog.Any("error", err))
	}
}

// purpose is what the current round's model call is for.
func (r *run) purpose(withTools bool) memory.APICallPurpose {
	switch {
	case callIn(r.ctx) != nil: // run by a call of another run
		return memory.PurposeSubAgent
	case withTools:
		return memory.PurposeToolRound
	case r.round == 0:
		return memory.PurposePlanning
	}
	return memory.PurposeContinuation
}

// recordCall appends the API log record of the round's model call.
func (r *run) recordCall(withTools bool, body *sentBody, ct *chatTel, res roundResult, finish string, err error) {
	l := r.obs.api
	if l.log == nil {
		return
	}
	sessionID := r.t.in.SessionID
	if v := callIn(r.ctx); sessionID == "" && v != nil {
		sessionID = v.SessionID // a sub-agent's run: the calling run's session
	}
	e := apiCallEnd{sessionID: sessionID, round: r.round, purpose: r.purpose(withTools),
		body: body, finish: finish, usage: res.usage, err: err, ct: ct}
	if l.content {
		e.text = r.parser.Raw()
		if withTools {
			e.calls = r.acc.Calls()
		}
	}
	l.record(r.ctx, r.obs.logger, r.a.cfg.Model, e)
}
