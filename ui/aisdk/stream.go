package aisdk

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/jsonw"
	"github.com/planround/planround/runner"
)

// Headers are the response headers of a UI message stream, as the ai
// package's UI_MESSAGE_STREAM_HEADERS names them.
var Headers = map[string]string{
	"Content-Type":                  "text/event-stream",
	"Cache-Control":                 "no-cache",
	"Connection":                    "keep-alive",
	"X-Vercel-Ai-Ui-Message-Stream": "v1",
	"X-Accel-Buffering":             "no",
}

// Writer writes a session's runner events as a UI message stream: one
// Server-Sent Event per chunk of the stream, each a JSON object on one
// data line. It keeps what a stream needs to say a turn in the protocol's
// terms (which text part is open, which tool parts the client has), so
// one Writer writes one response. A text delta costs one write and no
// allocation.
//
// Writer is for hosts that serve the stream themselves; [NewHandler]
// uses it.
type Writer struct {
	w     io.Writer
	flush func() error
	buf   []byte
	err   error

	turn    int64             // Seq of the turn being written
	started bool              // the start chunk was written
	ended   bool              // the finish chunk was written
	step    bool              // a step (a round of the run) is open
	parts   map[string]*parts // open text and reasoning parts, by Chunk.Parent
	calls   map[string]*call  // tool parts the client has, by id as shown
	usage   usage             // of the run's rounds (not a sub-agent's)
	// mangle, when set by a test, changes the stream: a chunk of a type
	// it answers mangleDrop for is left out, one it answers mangleHold
	// for is written after the next one; to show that a client's checks
	// catch it.
	mangle func(typ string) int
	held   []byte
}

// What a test's mangle does with a chunk.
const (
	mangleKeep = iota
	mangleDrop
	mangleHold
)

// parts are the open text and reasoning parts of one run (the host's, or
// a sub-agent's).
type parts struct {
	text, reasoning string // ids; "" when none is open
}

// call is a tool part the client has.
type call struct {
	input bool // its input was sent (tool-input-available)
	done  bool // its output, error or denial was sent
}

type usage struct {
	prompt, completion, total int64
	set                       bool
}

// NewWriter returns a Writer that writes to w and calls flush, when not
// nil, after every chunk (http.ResponseController.Flush for a response).
func NewWriter(w io.Writer, flush func() error) *Writer {
	return &Writer{w: w, flush: flush, buf: make([]byte, 0, 512)}
}

// Err returns the first write or flush error; the Writer writes nothing
// after one.
func (w *Writer) Err() error { return w.err }

// Start writes the start chunk of the assistant message: with messageID
// set, the client gives that id to the message (a new turn's message);
// empty, the stream continues the client's last assistant message (the
// answer to an approval response or a form answer).
func (w *Writer) Start(messageID string) {
	if w.started {
		return
	}
	w.started = true
	b := w.open("start")
	if messageID != "" {
		b = append(b, `,"messageId":`...)
		b = jsonw.AppendString(b, messageID)
	}
	w.send(b)
}

// continues makes w continue the client's last assistant message, mid-step,
// whose tool parts are known: their ids, and whether each has its input
// and its outcome. A call it has is not shown again.
func (w *Writer) continues(known map[string]call) {
	w.step = true
	if len(known) > 0 && w.calls == nil {
		w.calls = make(map[string]*call, len(known))
	}
	for id, c := range known {
		w.calls[id] = &c
	}
}

// Event writes one runner event.
func (w *Writer) Event(e runner.Event) {
	switch e.Kind {
	case runner.EventTurnStarted:
		w.turn = e.Seq
	case runner.EventChunk:
		if e.Chunk != nil {
			w.Chunk(e.Chunk)
		}
	case runner.EventTurnEnded:
		if e.Ended != nil {
			w.turnEnded(e.Seq, e.Ended)
		}
	}
}

// Chunk writes one chunk of a run.
func (w *Writer) Chunk(c *agent.Chunk) {
	switch c.Kind {
	case agent.KindText:
		w.delta(c, false)
	case agent.KindReasoning:
		w.delta(c, true)
	case agent.KindToolInput:
		w.toolInput(c)
	case agent.KindToolCall:
		w.toolCall(c)
	case agent.KindToolRejected:
		w.rejected(c)
	case agent.KindSide:
		w.side(c)
	case agent.KindRoundEnd:
		w.roundEnd(c)
	case agent.KindWarning:
		w.data("warning", "", c, map[string]any{"code": c.Code, "text": c.Text})
	case agent.KindInterrupted:
		w.closeParts(c.Parent)
		if c.Depth > 0 {
			w.data("interrupted", "", c, map[string]any{})
		}
	case agent.KindSuspended:
		w.closeParts(c.Parent)
		w.data("suspended", "", c, map[string]any{})
	}
}

// Waiting ends the response at a turn that waits for a person: the
// message finishes (finish reason "tool-calls"), its metadata saying
// status "waiting" and the event's Seq. The client answers with its next
// request.
func (w *Writer) Waiting(seq int64) {
	w.closeAll()
	w.finish("tool-calls", map[string]any{"status": "waiting", "seq": seq})
}

// Done writes the end of the stream, [DONE].
func (w *Writer) Done() {
	if w.err != nil {
		return
	}
	w.buf = append(w.buf[:0], "data: [DONE]\n\n"...)
	w.write()
}

// Error writes an error chunk with text.
func (w *Writer) Error(text string) {
	b := w.open("error")
	b = append(b, `,"errorText":`...)
	b = jsonw.AppendString(b, text)
	w.send(b)
}

// open starts a stream chunk of type typ in the buffer.
func (w *Writer) open(typ string) []byte {
	b := append(w.buf[:0], `data: {"type":"`...)
	b = append(b, typ...)
	return append(b, '"')
}

// send ends the chunk in b and writes it.
func (w *Writer) send(b []byte) {
	w.buf = append(b, "}\n\n"...)
	if w.mangle != nil {
		// The type is the chunk's first field.
		const prefix = len(`data: {"type":"`)
		end := prefix
		for end < len(w.buf) && w.buf[end] != '"' {
			end++
		}
		switch w.mangle(string(w.buf[prefix:end])) {
		case mangleDrop:
			return
		case mangleHold:
			w.held = append([]byte(nil), w.buf...)
			return
		}
		if held := w.held; held != nil {
			w.held = nil
			w.write()
			w.buf = held
		}
	}
	w.write()
}

func (w *Writer) write() {
	if w.err != nil {
		return
	}
	if _, w.err = w.w.Write(w.buf); w.err == nil && w.flush != nil {
		w.err = w.flush()
	}
}

// stepFor opens a step for c's round when c is the host's run's and none
// is open: a step is a round of the run.
func (w *Writer) stepFor(c *agent.Chunk) {
	if c.Depth > 0 || w.step {
		return
	}
	w.Start("")
	w.step = true
	w.send(w.open("start-step"))
}

// delta writes a text or reasoning delta, opening its part first.
func (w *Writer) delta(c *agent.Chunk, reasoning bool) {
	if c.Text == "" {
		return
	}
	w.stepFor(c)
	w.Start("")
	p := w.parts[c.Parent]
	if p == nil {
		if w.parts == nil {
			w.parts = make(map[string]*parts)
		}
		p = &parts{}
		w.parts[c.Parent] = p
	}
	id := &p.text
	kind := "text"
	if reasoning {
		id, kind = &p.reasoning, "reasoning"
	}
	if *id == "" {
		*id = partID(kind, w.turn, c)
		b := w.open(kind + "-start")
		b = append(b, `,"id":`...)
		b = jsonw.AppendString(b, *id)
		if c.Depth > 0 {
			b = append(b, `,"providerMetadata":`...)
			b = appendPlanround(b, nested(c, nil))
		}
		w.send(b)
	}
	var b []byte
	if reasoning {
		b = w.open("reasoning-delta")
	} else {
		b = w.open("text-delta")
	}
	b = append(b, `,"id":`...)
	b = jsonw.AppendString(b, *id)
	b = append(b, `,"delta":`...)
	b = jsonw.AppendString(b, c.Text)
	w.send(b)
}

// partID is the id of a text or reasoning part: unique in the message
// (its turn, its round, and the calls above a sub-agent's).
func partID(kind string, turn int64, c *agent.Chunk) string {
	b := make([]byte, 0, 32+len(c.Parent))
	b = append(b, kind...)
	b = append(b, '-')
	b = strconv.AppendInt(b, turn, 10)
	b = append(b, '-')
	if c.Parent != "" {
		b = append(b, c.Parent...)
		b = append(b, '-')
	}
	b = strconv.AppendInt(b, int64(c.Round), 10)
	return string(b)
}

// closeParts ends the open text and reasoning parts of the run whose
// chunks carry parent.
func (w *Writer) closeParts(parent string) {
	p := w.parts[parent]
	if p == nil {
		return
	}
	if p.reasoning != "" {
		b := w.open("reasoning-end")
		b = append(b, `,"id":`...)
		w.send(jsonw.AppendString(b, p.reasoning))
		p.reasoning = ""
	}
	if p.text != "" {
		b := w.open("text-end")
		b = append(b, `,"id":`...)
		w.send(jsonw.AppendString(b, p.text))
		p.text = ""
	}
}

// closeAll ends every open part and the step.
func (w *Writer) closeAll() {
	for _, k := range sortedKeys(w.parts) {
		w.closeParts(k)
	}
	if w.step {
		w.step = false
		w.send(w.open("finish-step"))
	}
}

// roundEnd ends a round: its parts, a data-planround-round part with
// what the round says (intent, finish reason, usage), and, for the host's
// run, its step.
func (w *Writer) roundEnd(c *agent.Chunk) {
	w.stepFor(c)
	w.closeParts(c.Parent)
	fields := map[string]any{"round": c.Round}
	if c.Intent != "" {
		fields["intent"] = c.Intent
	}
	if c.FinishReason != "" {
		fields["finish_reason"] = c.FinishReason
	}
	if c.Usage != nil {
		fields["usage"] = c.Usage
		if c.Depth == 0 {
			w.usage.prompt += c.Usage.PromptTokens
			w.usage.completion += c.Usage.CompletionTokens
			w.usage.total += c.Usage.TotalTokens
			w.usage.set = true
		}
	}
	w.data("round", "", c, fields)
	if c.Depth == 0 && w.step {
		w.step = false
		w.send(w.open("finish-step"))
	}
}

// callID is the id of c's call as the client knows it: a sub-agent's
// call's carries the ids of the calls above it.
func callID(c *agent.Chunk) string {
	if c.Parent == "" {
		return c.Tool.ID
	}
	return c.Parent + "/" + c.Tool.ID
}

// show gives the client c's tool part, when it has none: a dynamic tool
// part, executed by the server (providerExecuted).
func (w *Writer) show(c *agent.Chunk, id string) *call {
	if cl := w.calls[id]; cl != nil {
		return cl
	}
	w.stepFor(c)
	w.Start("")
	if w.calls == nil {
		w.calls = make(map[string]*call)
	}
	cl := &call{}
	w.calls[id] = cl
	b := w.open("tool-input-start")
	b = append(b, `,"toolCallId":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"toolName":`...)
	b = jsonw.AppendString(b, c.Tool.Name)
	b = append(b, `,"dynamic":true,"providerExecuted":true`...)
	if c.Depth > 0 {
		b = append(b, `,"toolMetadata":`...)
		b = appendPlanround(b, nested(c, nil))
	}
	w.send(b)
	return cl
}

// toolInput writes a fragment of a call's arguments.
func (w *Writer) toolInput(c *agent.Chunk) {
	if c.Tool == nil || c.Text == "" {
		return
	}
	id := callID(c)
	cl := w.show(c, id)
	if cl.input {
		return
	}
	b := w.open("tool-input-delta")
	b = append(b, `,"toolCallId":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"inputTextDelta":`...)
	b = jsonw.AppendString(b, c.Text)
	w.send(b)
}

// input sends a call's whole input, once.
func (w *Writer) input(c *agent.Chunk, id string, cl *call) {
	if cl.input {
		return
	}
	cl.input = true
	meta := map[string]any{}
	if len(c.Tool.Arguments) > 0 {
		// The arguments as the model wrote them, as the history gives
		// them too: a page shows the person what the call runs with from
		// this text, not from what JSON.parse makes of input (which
		// rounds large numbers and keeps one of two members of a name).
		meta["arguments_text"] = string(c.Tool.Arguments)
	}
	if c.Tool.ArgumentsDigest != "" {
		meta["arguments_digest"] = c.Tool.ArgumentsDigest
	}
	if c.Tool.Hints != nil {
		meta["hints"] = c.Tool.Hints
	}
	if len(c.Tool.Details) > 0 {
		meta["details"] = c.Tool.Details
	}
	if c.Tool.MustAsk {
		meta["must_ask"] = true
	}
	if c.Tool.ArgumentsRaw != "" {
		meta["arguments_raw"] = c.Tool.ArgumentsRaw
	}
	b := w.open("tool-input-available")
	b = append(b, `,"toolCallId":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"toolName":`...)
	b = jsonw.AppendString(b, c.Tool.Name)
	b = append(b, `,"dynamic":true,"providerExecuted":true,"input":`...)
	b = appendInput(b, c.Tool)
	if len(meta) > 0 || c.Depth > 0 {
		b = append(b, `,"toolMetadata":`...)
		b = appendPlanround(b, nested(c, meta))
	}
	w.send(b)
}

// appendInput appends a call's arguments: the JSON object, or the text the
// model wrote when it is not one, or {}.
func appendInput(b []byte, t *agent.ToolCall) []byte {
	switch {
	case len(t.Arguments) > 0:
		return append(b, t.Arguments...)
	case t.ArgumentsRaw != "":
		return jsonw.AppendString(b, t.ArgumentsRaw)
	}
	return append(b, "{}"...)
}

// toolCall writes a call's change of state. Its part is shown at its
// first state after the model's response (its approval, its execution),
// not when the model starts it: a client that sends approvals when every
// call of the step has an answer (the ai package's
// lastAssistantMessageIsCompleteWithApprovalResponses) then sees no call
// that the run has not come to yet. With the agent's
// Config.StreamToolArguments the part shows from the first fragment.
func (w *Writer) toolCall(c *agent.Chunk) {
	if c.Tool == nil {
		return
	}
	id := callID(c)
	switch c.Tool.State {
	case agent.StateApprovalRequired:
		cl := w.show(c, id)
		w.input(c, id, cl)
		b := w.open("tool-approval-request")
		b = append(b, `,"approvalId":`...)
		b = jsonw.AppendString(b, c.Tool.ApprovalID)
		b = append(b, `,"toolCallId":`...)
		b = jsonw.AppendString(b, id)
		if len(c.Tool.Details) > 0 {
			b = append(b, `,"reason":`...)
			b = jsonw.AppendString(b, joinLines(c.Tool.Details))
		}
		w.send(b)
	case agent.StateExecuting:
		cl := w.show(c, id)
		w.input(c, id, cl)
	case agent.StateResult:
		cl := w.show(c, id)
		w.input(c, id, cl)
		cl.done = true
		b := w.open("tool-output-available")
		b = append(b, `,"toolCallId":`...)
		b = jsonw.AppendString(b, id)
		b = append(b, `,"providerExecuted":true,"dynamic":true,"output":`...)
		b = jsonw.AppendString(b, c.Tool.Result)
		w.send(b)
	}
}

// approvalResponse writes the decision taken on an approval the client
// answered otherwise (tool-approval-response): its part shows the
// decision that stands.
func (w *Writer) approvalResponse(approvalID string, approved bool, reason string) {
	b := w.open("tool-approval-response")
	b = append(b, `,"approvalId":`...)
	b = jsonw.AppendString(b, approvalID)
	b = append(b, `,"approved":`...)
	b = strconv.AppendBool(b, approved)
	if reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonw.AppendString(b, reason)
	}
	w.send(append(b, `,"providerExecuted":true`...))
}

// rejected writes a rejected call: denied by a person or a policy
// (tool-output-denied), or stopped otherwise (tool-output-error), and a
// data-planround-rejection part with its cause, reason and partial result.
func (w *Writer) rejected(c *agent.Chunk) {
	if c.Tool == nil {
		return
	}
	id := callID(c)
	cl := w.show(c, id)
	w.input(c, id, cl)
	cl.done = true
	if c.Tool.Cause == agent.CauseUser || c.Tool.Cause == agent.CausePolicy {
		b := w.open("tool-output-denied")
		b = append(b, `,"toolCallId":`...)
		w.send(jsonw.AppendString(b, id))
	} else {
		b := w.open("tool-output-error")
		b = append(b, `,"toolCallId":`...)
		b = jsonw.AppendString(b, id)
		b = append(b, `,"providerExecuted":true,"dynamic":true,"errorText":`...)
		b = jsonw.AppendString(b, c.Tool.Reason)
		w.send(b)
	}
	fields := map[string]any{"toolCallId": id, "cause": c.Tool.Cause, "reason": c.Tool.Reason}
	if c.Tool.PartialResult != "" {
		fields["partial_result"] = c.Tool.PartialResult
	}
	w.data("rejection", "rejection-"+id, c, fields)
}

// side writes a tool's side message as a data part named after its
// payload's type (data-planround-card, data-planround-form,
// data-planround-elicitation; data-planround-side for any other), whose
// id is the form's id for a form.
func (w *Writer) side(c *agent.Chunk) {
	payload, err := json.Marshal(c.Side)
	if err != nil {
		return
	}
	var head struct {
		Type   string `json:"type"`
		FormID string `json:"form_id"`
	}
	_ = json.Unmarshal(payload, &head)
	name, id := "side", ""
	switch head.Type {
	case "card":
		name = "card"
	case "form_request":
		name, id = "form", head.FormID
	case "elicitation_request":
		name, id = "elicitation", head.FormID
	}
	fields := map[string]any{"payload": json.RawMessage(payload)}
	if c.Tool != nil {
		fields["toolCallId"] = callID(c)
		if _, shown := w.calls[callID(c)]; !shown {
			cl := w.show(c, callID(c))
			w.input(c, callID(c), cl)
		}
	}
	w.data(name, id, c, fields)
}

// data writes a data-planround-<name> part (with id, when not empty, so
// that a later one replaces it), its data fields plus where a
// sub-agent's chunk belongs.
func (w *Writer) data(name, id string, c *agent.Chunk, fields map[string]any) {
	w.Start("")
	if c != nil {
		fields = nested(c, fields)
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return
	}
	b := w.open("data-planround-" + name)
	if id != "" {
		b = append(b, `,"id":`...)
		b = jsonw.AppendString(b, id)
	}
	b = append(b, `,"data":`...)
	b = append(b, raw...)
	w.send(b)
}

// turnEnded ends the message with the turn: the finish chunk says why in
// the protocol's finish reasons and, in its metadata, in planround's
// (status, reason, cause, error, token usage, the event's Seq); a failed
// turn writes an error chunk first.
func (w *Writer) turnEnded(seq int64, end *runner.TurnEnded) {
	w.closeAll()
	meta := map[string]any{"status": end.Status, "seq": seq}
	if end.Reason != "" {
		meta["reason"] = end.Reason
	}
	if end.Cause != "" {
		meta["cause"] = end.Cause
	}
	reason := "stop"
	switch end.Status {
	case runner.StatusInterrupted:
		reason = "interrupted"
	case runner.StatusRejected, runner.StatusSuspended:
		reason = "other"
	case runner.StatusError:
		reason = "error"
		meta["error"] = end.Error
		w.Error(end.Error)
	}
	w.finish(reason, meta)
}

// finished reports whether the finish chunk was written.
func (w *Writer) finished() bool { return w.ended }

// finish writes the finish chunk.
func (w *Writer) finish(reason string, meta map[string]any) {
	w.Start("")
	w.ended = true
	if w.usage.set {
		meta["usage"] = map[string]int64{"prompt_tokens": w.usage.prompt, "completion_tokens": w.usage.completion, "total_tokens": w.usage.total}
	}
	b := w.open("finish")
	b = append(b, `,"finishReason":"`...)
	b = append(b, reason...)
	b = append(b, `","messageMetadata":`...)
	b = appendPlanround(b, meta)
	w.send(b)
}

// nested returns fields with where a sub-agent's chunk belongs added
// (a new map when fields is nil).
func nested(c *agent.Chunk, fields map[string]any) map[string]any {
	if fields == nil {
		fields = map[string]any{}
	}
	if c.Depth > 0 {
		fields["agent"], fields["depth"], fields["parent"] = c.Agent, c.Depth, c.Parent
	}
	return fields
}

// appendPlanround appends {"planround": fields}.
func appendPlanround(b []byte, fields map[string]any) []byte {
	raw, err := json.Marshal(fields)
	if err != nil {
		raw = []byte("{}")
	}
	b = append(b, `{"planround":`...)
	b = append(b, raw...)
	return append(b, '}')
}

func joinLines(lines []string) string {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	for i, l := range lines {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, l...)
	}
	return string(b)
}

// sortedKeys returns m's keys in order: chunks come out the same every
// time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
