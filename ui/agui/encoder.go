package agui

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/jsonw"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui/internal/turn"
)

// The names of the CUSTOM events: what AG-UI has no event for.
const (
	// CustomRoundEnd ends a round: {"round", "intent", "finishReason",
	// "usage"}.
	CustomRoundEnd = "planround.round_end"
	// CustomWarning is a warning chunk: {"code", "text"}.
	CustomWarning = "planround.warning"
	// CustomToolProgress is what a running tool wrote so far:
	// {"toolCallId", "partialResult"}.
	CustomToolProgress = "planround.tool_progress"
	// CustomToolRejected says why a call did not run or was cut:
	// {"toolCallId", "cause", "reason", "partialResult"}.
	CustomToolRejected = "planround.tool_rejected"
	// CustomSide is a tool's side payload that is not a JSON object:
	// {"toolCallId", "side"}.
	CustomSide = "planround.side"
	// CustomTurnEnded says how a turn ended when it did not just finish:
	// {"status", "reason", "cause"}.
	CustomTurnEnded = "planround.turn_ended"
)

// The reasons of the interrupts.
const (
	// ReasonToolApproval is the reason of an interrupt that asks for the
	// approval of a tool call. It is answered with {"approved": bool,
	// "reason": string}; a cancelled resume entry rejects the call.
	ReasonToolApproval = "tool_approval"
	// ReasonInputRequired is the reason of an interrupt that shows a form
	// (ask_user_question's, or an MCP server's elicitation). It is answered
	// with the answers, by question id, or the elicitation's content.
	ReasonInputRequired = "input_required"
)

// approvalSchema is the responseSchema of an approval interrupt.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean","description":"true runs the call, false rejects it"},"reason":{"type":"string","description":"why, for the model and the audit"}},"required":["approved"],"additionalProperties":false}`)

// An Encoder writes the AG-UI events of one run (one request of the
// protocol) for the runner events it is given, as server-sent events
// ("data: <json>\n\n"), flushing after every event when its writer is an
// http.Flusher. Call Begin first, Encode with each event, then End (or Fail);
// the mapping is in the package doc. An Encoder is not safe for concurrent
// use.
type Encoder struct {
	w       io.Writer
	flusher http.Flusher
	thread  string
	run     string
	err     error // the first write error; nothing is written after it

	buf []byte // the event being written, reused
	typ string // its type

	// filter, set by tests only, drops an event or holds it back until the
	// next one is written (a swap), to show that the clients notice.
	filter func(typ string) filterAction
	held   []byte

	turn      int64
	known     map[string]bool // the tool call ids the client holds already
	lanes     map[string]*lane
	calls     map[string]*call
	streaming int              // calls whose arguments stream, open
	open      []string         // the open calls, in the order they started
	subagents []string         // open sub-agent runs, in the order they started
	waiting   []interruptEntry // the interrupts of the calls that wait, in order
	ended     *runner.TurnEnded
	usage     tokenUsage
}

type filterAction int

const (
	keep filterAction = iota
	drop
	hold
)

// lane is a run's current round: the host's run (key "") or a sub-agent's
// (key: the call path that started it, which is also its subagentRunId).
type lane struct {
	sub       string // the subagentRunId, "" for the host's run
	open      bool   // a round is open (its STEP_STARTED was written)
	round     int
	step      string // "round <n>"
	msgID     string // the round's assistant message id
	reasonID  string // the id of its reasoning
	text      bool   // a text message is open
	reasoning bool   // a reasoning message is open
}

type call struct {
	open     bool // TOOL_CALL_START written, TOOL_CALL_END not yet
	shown    bool // the client has the call (started here, or before)
	streamed bool // its arguments came as tool_input fragments
}

type interruptEntry struct {
	callID string
	sub    string
	id     string
	value  json.RawMessage
}

type tokenUsage struct {
	seen                  bool
	input, output, totals int64
}

// NewEncoder returns an Encoder that writes the events of run runID of
// thread threadID to w.
func NewEncoder(w io.Writer, threadID, runID string) *Encoder {
	e := &Encoder{w: w, thread: threadID, run: runID, buf: make([]byte, 0, 512),
		lanes: map[string]*lane{}, calls: map[string]*call{}, known: map[string]bool{}}
	e.flusher, _ = w.(http.Flusher)
	return e
}

// Known tells e the ids of the tool calls the client shows already (those
// of its RunAgentInput's messages): a chunk that continues one of them
// (it runs, it has a result) does not open it again.
func (e *Encoder) Known(toolCallIDs ...string) {
	for _, id := range toolCallIDs {
		e.known[id] = true
	}
}

// Begin writes RUN_STARTED.
func (e *Encoder) Begin() error {
	e.start("RUN_STARTED")
	e.str("threadId", e.thread)
	e.str("runId", e.run)
	return e.emit()
}

// Encode writes the AG-UI events of ev. It returns the writer's error,
// after which it writes nothing.
func (e *Encoder) Encode(ev runner.Event) error {
	switch ev.Kind {
	case runner.EventTurnStarted:
		// A resumed turn goes on where the one before stopped: its rounds
		// are new messages. A turn that ended otherwise than finished or
		// suspended before this one (a run that also answers a new
		// message) says so now: RUN_FINISHED says only the last one's.
		e.closeLanes(false)
		if st := e.ended; st != nil && st.Status != runner.StatusFinished && st.Status != runner.StatusSuspended {
			e.custom(e.laneOf(""), CustomTurnEnded, st)
		}
		e.ended = nil
		e.turn = ev.Seq
	case runner.EventTurnEnded:
		e.ended = ev.Ended
	case runner.EventChunk:
		if ev.Turn != 0 && e.turn == 0 {
			e.turn = ev.Turn
		}
		e.chunk(ev.Chunk)
	}
	return e.err
}

func (e *Encoder) chunk(c *agent.Chunk) {
	if c == nil || c.Kind == agent.KindInterrupted || c.Kind == agent.KindSuspended {
		// The turn's end says it; a sub-agent's ends with its call.
		return
	}
	if e.streaming > 0 && c.Kind != agent.KindToolInput {
		e.closeStreamed()
	}
	l := e.lane(c)
	switch c.Kind {
	case agent.KindText:
		if c.Text == "" {
			return
		}
		if l.reasoning {
			e.endReasoning(l)
		}
		if !l.text {
			l.text = true
			e.start("TEXT_MESSAGE_START")
			e.str("messageId", l.msgID)
			e.str("role", "assistant")
			e.attr(l)
			e.emit()
		}
		e.start("TEXT_MESSAGE_CONTENT")
		e.str("messageId", l.msgID)
		e.str("delta", c.Text)
		e.attr(l)
		e.emit()
	case agent.KindReasoning:
		if c.Text == "" {
			return
		}
		id := l.reasonID
		if !l.reasoning {
			l.reasoning = true
			e.start("REASONING_START")
			e.str("messageId", id)
			e.attr(l)
			e.emit()
			e.start("REASONING_MESSAGE_START")
			e.str("messageId", id)
			e.str("role", "reasoning")
			e.attr(l)
			e.emit()
		}
		e.start("REASONING_MESSAGE_CONTENT")
		e.str("messageId", id)
		e.str("delta", c.Text)
		e.attr(l)
		e.emit()
	case agent.KindToolInput:
		if c.Tool == nil {
			return
		}
		id := callID(c)
		k := e.call(id)
		if !k.shown {
			e.startCall(l, k, id, c.Tool.Name)
			if k.open {
				k.streamed = true
				e.streaming++
			}
		}
		if k.open && c.Text != "" {
			e.start("TOOL_CALL_ARGS")
			e.str("toolCallId", id)
			e.str("delta", c.Text)
			e.attr(l)
			e.emit()
		}
	case agent.KindToolCall, agent.KindToolRejected, agent.KindSide:
		if c.Tool != nil {
			e.tool(l, c)
		}
	case agent.KindRoundEnd:
		e.roundEnd(l, c)
	case agent.KindWarning:
		e.custom(l, CustomWarning, struct {
			Code agent.WarningCode `json:"code,omitempty"`
			Text string            `json:"text"`
		}{c.Code, c.Text})
	}
}

// tool writes what a call's chunk says, once its arguments are whole.
func (e *Encoder) tool(l *lane, c *agent.Chunk) {
	t := c.Tool
	if c.Kind == agent.KindToolCall && t.State == agent.StateStart {
		// The arguments come with a later chunk (or as fragments): the call
		// opens then, so that a run that stops before shows no call without
		// arguments.
		return
	}
	id := callID(c)
	k := e.call(id)
	if !k.shown {
		e.startCall(l, k, id, t.Name)
	}
	if k.open && !k.streamed {
		e.wholeArgs(l, id, t)
	}
	if k.open {
		e.endCall(l, k, id)
	}
	switch c.Kind {
	case agent.KindSide:
		e.side(l, c, id)
		return
	case agent.KindToolRejected:
		e.answered(id)
		e.finishSubagent(id, t)
		e.custom(l, CustomToolRejected, struct {
			ToolCallID    string      `json:"toolCallId"`
			Cause         agent.Cause `json:"cause,omitempty"`
			Reason        string      `json:"reason,omitempty"`
			PartialResult string      `json:"partialResult,omitempty"`
		}{id, t.Cause, t.Reason, t.PartialResult})
		e.result(l, id, t.Reason)
		return
	}
	switch t.State {
	case agent.StateApprovalRequired:
		e.approval(l, c, id)
	case agent.StateExecuting:
		e.answered(id)
		if t.PartialResult != "" {
			e.custom(l, CustomToolProgress, struct {
				ToolCallID    string `json:"toolCallId"`
				PartialResult string `json:"partialResult"`
			}{id, t.PartialResult})
		}
	case agent.StateResult:
		e.answered(id)
		e.finishSubagent(id, t)
		e.result(l, id, t.Result)
	}
}

// wholeArgs writes a call's whole arguments as one TOOL_CALL_ARGS.
func (e *Encoder) wholeArgs(l *lane, id string, t *agent.ToolCall) {
	args := string(t.Arguments)
	if args == "" {
		args = t.ArgumentsRaw
	}
	if args == "" {
		args = "{}"
	}
	e.start("TOOL_CALL_ARGS")
	e.str("toolCallId", id)
	e.str("delta", args)
	e.attr(l)
	e.emit()
}

func (e *Encoder) startCall(l *lane, k *call, id, name string) {
	k.shown = true
	if e.known[id] {
		return
	}
	k.open = true
	e.open = append(e.open, id)
	e.start("TOOL_CALL_START")
	e.str("toolCallId", id)
	e.str("toolCallName", name)
	e.str("parentMessageId", l.msgID)
	e.attr(l)
	e.emit()
}

func (e *Encoder) endCall(l *lane, k *call, id string) {
	k.open = false
	for i, o := range e.open {
		if o == id {
			e.open = append(e.open[:i], e.open[i+1:]...)
			break
		}
	}
	if k.streamed {
		k.streamed = false
		e.streaming--
	}
	e.start("TOOL_CALL_END")
	e.str("toolCallId", id)
	e.attr(l)
	e.emit()
}

// closeStreamed ends the calls whose arguments streamed: a chunk of
// another kind says their arguments are whole.
func (e *Encoder) closeStreamed() {
	for _, id := range append([]string(nil), e.open...) {
		if k := e.calls[id]; k.streamed {
			e.endCall(e.laneOf(id), k, id)
		}
	}
}

func (e *Encoder) result(l *lane, id, content string) {
	e.start("TOOL_CALL_RESULT")
	e.str("messageId", l.msgID+"/"+id+".result")
	e.str("toolCallId", id)
	e.str("content", content)
	e.str("role", "tool")
	e.attr(l)
	e.emit()
}

// approval notes the interrupt of a call that waits for its approval.
func (e *Encoder) approval(l *lane, c *agent.Chunk, id string) {
	t := c.Tool
	msg := "Allow " + t.Name + " to run with these arguments?"
	if len(t.Details) > 0 {
		msg += "\n" + strings.Join(t.Details, "\n")
	}
	type meta struct {
		Tool            string          `json:"tool"`
		Arguments       json.RawMessage `json:"arguments,omitempty"`
		ArgumentsDigest string          `json:"argumentsDigest,omitempty"`
		Hints           []string        `json:"hints,omitempty"`
		MustAsk         bool            `json:"mustAsk,omitempty"`
		Details         []string        `json:"details,omitempty"`
		Agent           string          `json:"agent,omitempty"`
	}
	m := meta{Tool: t.Name, Arguments: t.Arguments, ArgumentsDigest: t.ArgumentsDigest, MustAsk: t.MustAsk, Details: t.Details, Agent: c.Agent}
	if t.Hints != nil {
		m.Hints = t.Hints.Labels()
	}
	e.wait(id, l.sub, interrupt{
		SubagentRunID: l.sub, ID: t.ApprovalID, Reason: ReasonToolApproval, Message: msg,
		ToolCallID: id, ResponseSchema: approvalSchema, Metadata: mustJSON(m),
	})
}

// ask notes the interrupt of a call that waits for a person as a store
// lists it, not as the turn's events showed it: c is the call's
// approval_required chunk or its form's side chunk, and id the call as the
// client shows it. An approval's call that the client does not hold
// (held false: the turn's events went to another client) is shown first,
// with its arguments, in the message of its round: the client answers an
// approval with the call it holds.
func (e *Encoder) ask(id string, held bool, c *agent.Chunk) {
	l := &lane{}
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		l.sub = id[:i]
	}
	if c.Kind == agent.KindSide {
		e.side(l, c, id)
		return
	}
	if !held {
		l.msgID = e.messageID("", c.Round)
		k := e.call(id)
		e.startCall(l, k, id, c.Tool.Name)
		if k.open {
			e.wholeArgs(l, id, c.Tool)
			e.endCall(l, k, id)
		}
	}
	e.approval(l, c, id)
}

// interrupt is the JSON of an AG-UI Interrupt.
type interrupt struct {
	SubagentRunID  string          `json:"subagentRunId,omitempty"`
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

func (e *Encoder) wait(callID, sub string, in interrupt) {
	e.answered(callID)
	e.waiting = append(e.waiting, interruptEntry{callID: callID, sub: sub, id: in.ID, value: mustJSON(in)})
}

// answered drops the interrupt of a call that moved on.
func (e *Encoder) answered(callID string) {
	for i, w := range e.waiting {
		if w.callID == callID {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			return
		}
	}
}

// sidePayload is what the encoder reads of a side payload.
type sidePayload struct {
	Type      string              `json:"type"`
	FormID    string              `json:"form_id"`
	Title     string              `json:"title"`
	Questions []interact.Question `json:"questions"`
	Server    string              `json:"server"`
	Mode      string              `json:"mode"`
	Message   string              `json:"message"`
	Schema    json.RawMessage     `json:"schema"`
	URL       string              `json:"url"`
	Host      string              `json:"host"`
}

func (e *Encoder) side(l *lane, c *agent.Chunk, id string) {
	raw, err := json.Marshal(c.Side)
	if err != nil {
		raw = []byte("null")
	}
	if turn.SideAsks(c.Side) {
		var p sidePayload
		if json.Unmarshal(raw, &p) == nil && p.FormID != "" {
			e.wait(id, l.sub, formInterrupt(l.sub, id, p))
			return
		}
	}
	if len(raw) > 0 && raw[0] == '{' {
		var p struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &p)
		if p.Type == "" {
			p.Type = "side"
		}
		e.start("ACTIVITY_SNAPSHOT")
		e.str("messageId", l.msgID+"/"+id+".side")
		e.str("activityType", "planround."+p.Type)
		e.raw("content", raw)
		e.attr(l)
		e.emit()
		return
	}
	e.custom(l, CustomSide, struct {
		ToolCallID string          `json:"toolCallId"`
		Side       json.RawMessage `json:"side"`
	}{id, raw})
}

// formInterrupt is the interrupt of a form: its responseSchema is built from
// the form's questions, or is the elicitation's own schema.
func formInterrupt(sub, callID string, p sidePayload) interrupt {
	in := interrupt{SubagentRunID: sub, ID: p.FormID, Reason: ReasonInputRequired, ToolCallID: callID}
	type meta struct {
		Form   string `json:"form"`
		Server string `json:"server,omitempty"`
		Mode   string `json:"mode,omitempty"`
		URL    string `json:"url,omitempty"`
		Host   string `json:"host,omitempty"`
	}
	in.Metadata = mustJSON(meta{Form: p.Type, Server: p.Server, Mode: p.Mode, URL: p.URL, Host: p.Host})
	if p.Type == interact.TypeElicitationRequest {
		in.Message = p.Message
		switch {
		case p.Mode == interact.ModeURL:
			in.ResponseSchema = json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["accept","decline","cancel"]}},"required":["action"]}`)
		case len(p.Schema) > 0 && p.Schema[0] == '{':
			in.ResponseSchema = p.Schema
		}
		return in
	}
	in.Message = p.Title
	type prop struct {
		Type        string   `json:"type"`
		Title       string   `json:"title,omitempty"`
		Enum        []string `json:"enum,omitempty"`
		Items       *prop    `json:"items,omitempty"`
		UniqueItems bool     `json:"uniqueItems,omitempty"`
	}
	props := make(map[string]prop, len(p.Questions))
	required := make([]string, 0, len(p.Questions))
	var lines []string
	for _, q := range p.Questions {
		switch q.Kind {
		case interact.KindSingle:
			props[q.ID] = prop{Type: "string", Title: q.Question, Enum: q.Options}
		case interact.KindMultiple:
			props[q.ID] = prop{Type: "array", Title: q.Question, Items: &prop{Type: "string", Enum: q.Options}, UniqueItems: true}
		default:
			props[q.ID] = prop{Type: "string", Title: q.Question}
		}
		required = append(required, q.ID)
		lines = append(lines, q.Question)
	}
	if in.Message == "" {
		in.Message = strings.Join(lines, "\n")
	}
	in.ResponseSchema = mustJSON(struct {
		Type                 string          `json:"type"`
		Properties           map[string]prop `json:"properties"`
		Required             []string        `json:"required"`
		AdditionalProperties bool            `json:"additionalProperties"`
	}{"object", props, required, false})
	return in
}

func (e *Encoder) roundEnd(l *lane, c *agent.Chunk) {
	if c.Usage != nil {
		e.usage.seen = true
		e.usage.input += c.Usage.PromptTokens
		e.usage.output += c.Usage.CompletionTokens
		t := c.Usage.TotalTokens
		if t == 0 {
			t = c.Usage.PromptTokens + c.Usage.CompletionTokens
		}
		e.usage.totals += t
	}
	e.endMessages(l)
	type usage struct {
		InputTokens  int64 `json:"inputTokens"`
		OutputTokens int64 `json:"outputTokens"`
		TotalTokens  int64 `json:"totalTokens,omitempty"`
	}
	v := struct {
		Round        int                `json:"round"`
		Intent       agent.Intent       `json:"intent,omitempty"`
		FinishReason agent.FinishReason `json:"finishReason,omitempty"`
		Usage        *usage             `json:"usage,omitempty"`
	}{Round: c.Round, Intent: c.Intent, FinishReason: c.FinishReason}
	if c.Usage != nil {
		v.Usage = &usage{c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.TotalTokens}
	}
	e.custom(l, CustomRoundEnd, v)
	e.endStep(l)
}

// lane returns the lane of c's run, with c's round open.
func (e *Encoder) lane(c *agent.Chunk) *lane {
	l := e.lanes[c.Parent]
	if l == nil {
		l = &lane{sub: c.Parent}
		e.lanes[c.Parent] = l
	}
	if c.Depth > 0 {
		e.startSubagent(c)
	}
	if l.open && l.round == c.Round {
		return l
	}
	if l.open {
		e.endMessages(l)
		e.endStep(l)
	}
	l.open, l.round = true, c.Round
	l.step = "round " + strconv.Itoa(c.Round)
	l.msgID = e.messageID(c.Parent, c.Round)
	l.reasonID = l.msgID + ".reasoning"
	e.start("STEP_STARTED")
	e.str("stepName", l.step)
	e.attr(l)
	e.emit()
	return l
}

// messageID returns the id of the assistant message of a round of the
// turn: "<thread>.<turn>.<round>", prefixed with a sub-agent's run (its
// chunks' parent) and "/".
func (e *Encoder) messageID(parent string, round int) string {
	var b strings.Builder
	if parent != "" {
		b.WriteString(parent)
		b.WriteByte('/')
	}
	b.WriteString(e.thread)
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(e.turn, 10))
	b.WriteByte('.')
	b.WriteString(strconv.Itoa(round))
	return b.String()
}

// laneOf returns the lane a call of id belongs to.
func (e *Encoder) laneOf(id string) *lane {
	parent := ""
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		parent = id[:i]
	}
	if l := e.lanes[parent]; l != nil {
		return l
	}
	return &lane{sub: parent}
}

func (e *Encoder) endMessages(l *lane) {
	if l.reasoning {
		e.endReasoning(l)
	}
	if l.text {
		l.text = false
		e.start("TEXT_MESSAGE_END")
		e.str("messageId", l.msgID)
		e.attr(l)
		e.emit()
	}
}

func (e *Encoder) endReasoning(l *lane) {
	l.reasoning = false
	id := l.reasonID
	e.start("REASONING_MESSAGE_END")
	e.str("messageId", id)
	e.attr(l)
	e.emit()
	e.start("REASONING_END")
	e.str("messageId", id)
	e.attr(l)
	e.emit()
}

func (e *Encoder) endStep(l *lane) {
	if !l.open {
		return
	}
	l.open = false
	e.start("STEP_FINISHED")
	e.str("stepName", l.step)
	e.attr(l)
	e.emit()
}

// closeLanes ends every open round (sub-agents' first), and with subagents
// the open sub-agent runs.
func (e *Encoder) closeLanes(subagents bool) {
	if e.streaming > 0 {
		e.closeStreamed()
	}
	for len(e.open) > 0 {
		id := e.open[0]
		e.endCall(e.laneOf(id), e.calls[id], id)
	}
	for i := len(e.subagents) - 1; i >= 0; i-- {
		if l := e.lanes[e.subagents[i]]; l != nil {
			e.endMessages(l)
			e.endStep(l)
		}
	}
	if l := e.lanes[""]; l != nil {
		e.endMessages(l)
		e.endStep(l)
	}
	if !subagents {
		return
	}
	for len(e.subagents) > 0 {
		sub := e.subagents[len(e.subagents)-1]
		e.subagents = e.subagents[:len(e.subagents)-1]
		e.start("SUBAGENT_FINISHED")
		e.str("subagentRunId", sub)
		if len(e.waiting) > 0 {
			// The run stops for a person: the sub-agent is suspended, with
			// the interrupts of its run and of the runs below it.
			var ids []string
			for _, w := range e.waiting {
				if w.sub == sub || strings.HasPrefix(w.sub, sub+"/") {
					ids = append(ids, w.id)
				}
			}
			e.raw("outcome", mustJSON(struct {
				Type         string   `json:"type"`
				InterruptIDs []string `json:"interruptIds,omitempty"`
			}{"suspended", ids}))
		}
		e.emit()
	}
}

// startSubagent writes SUBAGENT_STARTED for the run of c, and for the runs
// above it, the first time they show.
func (e *Encoder) startSubagent(c *agent.Chunk) {
	if e.subagentOpen(c.Parent) {
		return
	}
	parts := strings.Split(c.Parent, "/")
	names := strings.Split(c.Agent, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		if e.subagentOpen(sub) {
			continue
		}
		e.subagents = append(e.subagents, sub)
		name := c.Agent
		if len(names) == len(parts) {
			name = names[i]
		}
		e.start("SUBAGENT_STARTED")
		e.str("subagentRunId", sub)
		e.str("name", name)
		if i > 0 {
			e.str("parentSubagentRunId", strings.Join(parts[:i], "/"))
		}
		e.str("parentToolCallId", sub)
		e.emit()
	}
}

func (e *Encoder) subagentOpen(sub string) bool {
	for _, s := range e.subagents {
		if s == sub {
			return true
		}
	}
	return false
}

// finishSubagent ends the sub-agent run a call started, when the call ends.
func (e *Encoder) finishSubagent(id string, t *agent.ToolCall) {
	i := len(e.subagents) - 1
	for ; i >= 0 && e.subagents[i] != id; i-- {
	}
	if i < 0 {
		return
	}
	if l := e.lanes[id]; l != nil {
		e.endMessages(l)
		e.endStep(l)
	}
	e.subagents = append(e.subagents[:i], e.subagents[i+1:]...)
	if t.State == agent.StateRejected {
		e.start("SUBAGENT_ERROR")
		e.str("subagentRunId", id)
		e.str("message", t.Reason)
		if t.Cause != "" {
			e.str("code", string(t.Cause))
		}
		e.emit()
		return
	}
	e.start("SUBAGENT_FINISHED")
	e.str("subagentRunId", id)
	e.raw("outcome", []byte(`{"type":"success"}`))
	e.emit()
}

func (e *Encoder) call(id string) *call {
	k := e.calls[id]
	if k == nil {
		k = &call{}
		e.calls[id] = k
	}
	return k
}

// callID is the id of c's call as the client shows it: a sub-agent's calls
// carry the path of the calls above them.
func callID(c *agent.Chunk) string {
	if c.Parent == "" {
		return c.Tool.ID
	}
	return c.Parent + "/" + c.Tool.ID
}

// End closes what is open and writes how the run ended: RUN_FINISHED with
// the interrupt outcome when calls wait for a person, else after the turn's
// end, RUN_ERROR for a failed turn and RUN_FINISHED for the others (the
// cancelled outcome for an interrupted turn, or when no end was seen).
func (e *Encoder) End() error {
	e.closeLanes(true)
	if len(e.waiting) > 0 {
		e.start("RUN_FINISHED")
		e.str("threadId", e.thread)
		e.str("runId", e.run)
		e.buf = append(e.buf, `,"outcome":{"type":"interrupt","interrupts":[`...)
		for i, w := range e.waiting {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, w.value...)
		}
		e.buf = append(e.buf, "]}"...)
		e.usageField()
		return e.emit()
	}
	outcome := "cancelled"
	if st := e.ended; st != nil {
		if st.Status != runner.StatusFinished {
			e.custom(e.laneOf(""), CustomTurnEnded, st)
		}
		switch st.Status {
		case runner.StatusError:
			msg := st.Error
			if msg == "" {
				msg = "the run failed"
			}
			e.start("RUN_ERROR")
			e.str("message", msg)
			e.str("code", string(st.Status))
			e.usageField()
			return e.emit()
		case runner.StatusInterrupted:
		default:
			outcome = "success"
		}
	}
	e.start("RUN_FINISHED")
	e.str("threadId", e.thread)
	e.str("runId", e.run)
	e.buf = append(e.buf, `,"outcome":{"type":"`...)
	e.buf = append(e.buf, outcome...)
	e.buf = append(e.buf, `"}`...)
	e.usageField()
	return e.emit()
}

// Fail writes RUN_ERROR with msg and code, for a run that could not be
// followed to its end.
func (e *Encoder) Fail(msg, code string) error {
	e.start("RUN_ERROR")
	e.str("message", msg)
	if code != "" {
		e.str("code", code)
	}
	return e.emit()
}

func (e *Encoder) usageField() {
	if !e.usage.seen {
		return
	}
	e.buf = append(e.buf, `,"usage":[{"inputTokens":`...)
	e.buf = strconv.AppendInt(e.buf, e.usage.input, 10)
	e.buf = append(e.buf, `,"outputTokens":`...)
	e.buf = strconv.AppendInt(e.buf, e.usage.output, 10)
	e.buf = append(e.buf, `,"totalTokens":`...)
	e.buf = strconv.AppendInt(e.buf, e.usage.totals, 10)
	e.buf = append(e.buf, "}]"...)
}

func (e *Encoder) custom(l *lane, name string, v any) {
	e.start("CUSTOM")
	e.str("name", name)
	e.raw("value", mustJSON(v))
	e.attr(l)
	e.emit()
}

// start begins an event of type typ in the buffer.
func (e *Encoder) start(typ string) {
	e.typ = typ
	e.buf = append(e.buf[:0], `data: {"type":"`...)
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, '"')
}

func (e *Encoder) str(key, val string) {
	e.buf = append(e.buf, ',', '"')
	e.buf = append(e.buf, key...)
	e.buf = append(e.buf, '"', ':')
	e.buf = jsonw.AppendString(e.buf, val)
}

func (e *Encoder) raw(key string, val []byte) {
	e.buf = append(e.buf, ',', '"')
	e.buf = append(e.buf, key...)
	e.buf = append(e.buf, '"', ':')
	e.buf = append(e.buf, val...)
}

// attr attributes an event of a sub-agent's run to it.
func (e *Encoder) attr(l *lane) {
	if l.sub != "" {
		e.str("subagentRunId", l.sub)
	}
}

// emit ends the event in the buffer, writes and flushes it.
func (e *Encoder) emit() error {
	if e.err != nil {
		return e.err
	}
	e.buf = append(e.buf, "}\n\n"...)
	if e.filter != nil {
		switch e.filter(e.typ) {
		case drop:
			return nil
		case hold:
			e.held = append(e.held[:0], e.buf...)
			return nil
		}
	}
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = err
		return err
	}
	if e.held != nil {
		held := e.held
		e.held = nil
		if _, err := e.w.Write(held); err != nil {
			e.err = err
			return err
		}
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	return nil
}

// mustJSON marshals v, one of the encoder's own values, which always
// marshal; {} stands for one that would not.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
