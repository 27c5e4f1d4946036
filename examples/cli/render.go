package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

// renderer shows the chunks of a run.
type renderer interface {
	// chunk shows one chunk.
	chunk(c agent.Chunk)
	// endTurn finishes the output of a turn, however it ended.
	endTurn()
	// err returns the first write error; the run stops at it.
	err() error
}

// jsonRenderer writes one JSON object per chunk per line: the chunk's wire
// schema (agent.Chunk's JSON, as docs/library.md shows it), and nothing else.
type jsonRenderer struct {
	enc  *json.Encoder
	werr error
}

func newJSONRenderer(w io.Writer) *jsonRenderer {
	enc := json.NewEncoder(w)
	// "<need_tool>" stays readable instead of "\u003cneed_tool\u003e";
	// both decode to the same string.
	enc.SetEscapeHTML(false)
	return &jsonRenderer{enc: enc}
}

func (r *jsonRenderer) chunk(c agent.Chunk) {
	if r.werr == nil {
		r.werr = r.enc.Encode(c)
	}
}

func (r *jsonRenderer) endTurn()   {}
func (r *jsonRenderer) err() error { return r.werr }

// ANSI styles, used only when colour is on.
const (
	styleReset  = "\x1b[0m"
	styleBold   = "\x1b[1m"
	styleDim    = "\x1b[2m"
	styleRed    = "\x1b[31m"
	styleGreen  = "\x1b[32m"
	styleYellow = "\x1b[33m"
	styleCyan   = "\x1b[36m"
)

// Limits of what the human output shows of arguments and results.
const (
	maxArgsChars   = 200
	maxResultLines = 4
	maxLineChars   = 160
	// maxLiveLines is how many lines of a running tool's output are shown
	// as they come; of the rest only the last maxResultLines are shown,
	// when the call ends.
	maxLiveLines = 20
)

// humanRenderer streams text as it comes and shows each tool call's states
// on their own lines:
//
//	⏺ get_weather {"city":"Paris"}
//	  … executing
//	  ✓ result: sunny, 22 C
type humanRenderer struct {
	w     io.Writer
	color bool
	// live is true on a terminal: a call's start line is shown at once and
	// replaced when its arguments are known.
	live bool
	werr error

	atLineStart bool // the last byte written was a newline (or nothing was)
	reasoning   bool // inside a block of reasoning text
	liveStart   bool // an unfinished start line is on screen
	calls       map[string]*callView

	// indent starts every line of a sub-agent's chunks (see enter); scope
	// names the run whose chunks are shown: "" for the host's own run.
	indent, scope string

	// cancelled is the turn's ctx.Err: nil when the run was not
	// interrupted (Ctrl-C), so its interrupted chunk follows a rejection.
	// A nil cancelled means always interrupted.
	cancelled func() error
}

// callView is what the renderer remembers of one tool call.
type callView struct {
	header  bool            // the "⏺ name args" line was shown
	partial string          // partial output not yet shown (no newline yet)
	shown   bool            // some partial output was shown
	output  strings.Builder // all the partial output so far
	lines   int             // lines of partial output shown
	hidden  int             // lines of partial output beyond maxLiveLines
	tail    []string        // the last maxResultLines hidden lines
}

func newHumanRenderer(w io.Writer, color, live bool) *humanRenderer {
	return &humanRenderer{w: w, color: color, live: live, atLineStart: true, calls: map[string]*callView{}}
}

func (r *humanRenderer) err() error { return r.werr }

func (r *humanRenderer) write(s string) {
	if r.werr != nil || s == "" {
		return
	}
	if r.indent != "" {
		s = r.indented(s)
	}
	_, r.werr = io.WriteString(r.w, s)
	r.setLineStart(strings.HasSuffix(s, "\n"))
}

// indented puts the indent at the start of every line s begins or starts.
func (r *humanRenderer) indented(s string) string {
	var b strings.Builder
	start := r.atLineStart
	for s != "" {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line = s[:i+1]
		}
		if start && line != "\n" && !strings.HasPrefix(line, "\r") {
			b.WriteString(r.styled(styleDim, r.indent))
		}
		b.WriteString(line)
		start = strings.HasSuffix(line, "\n")
		s = s[len(line):]
	}
	return b.String()
}

// enter switches the output to the run that yielded c: the host's, or a
// sub-agent's, whose lines are indented by its depth and start with its
// name:
//
//	⏺ researcher {"task":"Find the weather in Oslo."}
//	  … executing
//	  researcher │ ⏺ get_weather {"city":"Oslo"}
//	  researcher │   ✓ result: Oslo: cloudy, 11 °C
//	  researcher │ Here is what I found: …
//	  ✓ result: Here is what I found: …
func (r *humanRenderer) enter(c agent.Chunk) {
	scope := ""
	if c.Depth > 0 {
		scope = c.Parent + "\x00" + c.Agent
	}
	if scope == r.scope {
		return
	}
	r.newline() // ends the other run's line, under its indent
	r.scope, r.indent = scope, ""
	if c.Depth > 0 {
		name := oneLine(c.Agent, maxArgsChars)
		if name == "" {
			name = "sub-agent"
		}
		r.indent = strings.Repeat("  ", c.Depth) + name + " │ "
	}
}

func (r *humanRenderer) setLineStart(b bool) { r.atLineStart = b }

// logWriter writes log records to w, each on lines of its own: it owns the
// screen while it writes, so a record never runs into a line of the
// transcript, and waits while a question is on screen. slog handlers write
// each record in one Write.
type logWriter struct {
	w      io.Writer
	screen *screen
}

func (l *logWriter) Write(p []byte) (n int, err error) {
	l.screen.own(func() { n, err = l.w.Write(p) })
	return n, err
}

// styled wraps s in an ANSI style when colour is on.
func (r *humanRenderer) styled(style, s string) string {
	if !r.color || s == "" {
		return s
	}
	return style + s + styleReset
}

// line writes one whole line, starting a new one first when needed.
func (r *humanRenderer) line(style, s string) {
	r.newline()
	r.write(r.styled(style, s) + "\n")
}

// newline ends the current line, if any, and any unfinished start line.
func (r *humanRenderer) newline() {
	if r.liveStart {
		r.write("\r\x1b[K")
		r.setLineStart(true)
		r.liveStart = false
	}
	if !r.atLineStart {
		r.write("\n")
	}
	if r.reasoning {
		r.reasoning = false
	}
}

func (r *humanRenderer) chunk(c agent.Chunk) {
	r.enter(c)
	switch c.Kind {
	case agent.KindText:
		if r.reasoning || r.liveStart {
			r.newline()
		}
		r.write(clean(c.Text))
	case agent.KindReasoning:
		if !r.reasoning {
			r.newline()
			r.write(r.styled(styleDim, "thinking: "))
			r.reasoning = true
		}
		r.write(r.styled(styleDim, clean(c.Text)))
	case agent.KindRoundEnd:
		r.newline()
	case agent.KindToolCall:
		r.toolCall(c)
	case agent.KindToolRejected:
		v := r.view(c)
		r.header(c.Tool, v)
		r.flushPartial(v)
		r.flushTail(v)
		r.line(styleRed, "  ✗ "+rejection(c.Tool))
		if c.Tool.PartialResult != "" && !v.shown {
			r.block("  partial output: ", styleDim, c.Tool.PartialResult)
		}
	case agent.KindSide:
		switch side := c.Side.(type) {
		case interact.Card:
			r.card(side)
		case interact.FormRequest:
			title := oneLine(side.Title, maxLineChars)
			if title != "" {
				title = "“" + title + "” "
			}
			n := len(side.Questions)
			r.line(styleDim, fmt.Sprintf("  ◆ form %s(%d %s): answer below", title, n, plural(n, "question")))
		case interact.ElicitationRequest:
			what := "a form"
			if side.Mode == interact.ModeURL {
				what = "to open a link on " + oneLine(side.Host, maxLineChars)
			}
			r.line(styleDim, fmt.Sprintf("  ◆ the MCP server %s asks %s: answer below", oneLine(side.Server, maxLineChars), what))
		default:
			b, _ := json.Marshal(c.Side)
			r.line(styleDim, "  ◆ "+c.Tool.Name+": "+oneLine(string(b), maxArgsChars))
		}
	case agent.KindWarning:
		r.line(styleYellow, "⚠ "+clean(c.Text))
	case agent.KindInterrupted:
		if r.cancelled != nil && r.cancelled() == nil {
			// Nobody pressed Ctrl-C: a rejected call ended the run.
			r.line(styleYellow, "⏹ stopped: the tool call was rejected")
			return
		}
		r.line(styleYellow, "⏹ interrupted")
	}
}

// rejection is the text of a rejected line: the reason, after "rejected: "
// unless the reason already begins with that word ("rejected by user"). A
// call the agent could not run (an unknown tool, invalid arguments) shows
// its error as it is: nobody rejected it.
func rejection(tc *agent.ToolCall) string {
	reason := oneLine(tc.Reason, maxLineChars)
	switch {
	case tc.Cause == agent.CauseUnknownTool || tc.Cause == agent.CauseInvalidArguments:
		return reason
	case len(reason) >= len("rejected") && strings.EqualFold(reason[:len("rejected")], "rejected"):
		return reason
	}
	return "rejected: " + reason
}

// view returns what the renderer remembers of c's call. A sub-agent's call
// is known by its parent call's id and its own, which may be the id of a
// call of another run.
func (r *humanRenderer) view(c agent.Chunk) *callView {
	key := c.Tool.ID
	if c.Depth > 0 {
		key = c.Parent + "/" + key
	}
	v, ok := r.calls[key]
	if !ok {
		v = &callView{}
		r.calls[key] = v
	}
	return v
}

func (r *humanRenderer) toolCall(c agent.Chunk) {
	tc := c.Tool
	v := r.view(c)
	switch tc.State {
	case agent.StateStart:
		// The arguments are still being written. On a terminal show the
		// name at once and replace the line when they are complete.
		if r.live {
			r.newline()
			r.write(r.styled(styleDim, "⏺ "+tc.Name+" …"))
			r.liveStart = true
		}
	case agent.StateApprovalRequired:
		r.header(tc, v)
	case agent.StateExecuting:
		r.header(tc, v)
		if tc.PartialResult == "" {
			r.line(styleDim, "  … executing")
			return
		}
		r.partial(v, tc.PartialResult)
	case agent.StateResult:
		r.header(tc, v)
		r.flushPartial(v)
		r.flushTail(v)
		out := v.output.String()
		if !v.shown || !strings.HasPrefix(tc.Result, out) {
			r.block("  ✓ result: ", styleGreen, tc.Result)
			return
		}
		// The output was shown as it came: do not repeat it, only what
		// the result adds (an exit status, a note).
		if rest := strings.TrimSpace(tc.Result[len(out):]); rest != "" {
			r.block("  ✓ done: ", styleGreen, rest)
			return
		}
		r.line(styleGreen, "  ✓ done")
	}
}

// header shows the call's name and arguments once.
func (r *humanRenderer) header(tc *agent.ToolCall, v *callView) {
	if v.header {
		return
	}
	v.header = true
	args := string(tc.Arguments)
	if args == "" {
		args = tc.ArgumentsRaw
	}
	s := r.styled(styleBold+styleCyan, "⏺ "+tc.Name)
	if args != "" {
		s += " " + oneLine(args, maxArgsChars)
	}
	r.newline()
	r.write(s + "\n")
}

// partial shows the whole lines of a running tool's output, indented, and
// keeps an unfinished last line until it is complete. Beyond maxLiveLines
// lines it says once that the output goes on, and keeps the last lines for
// flushTail.
func (r *humanRenderer) partial(v *callView, p string) {
	v.output.WriteString(p)
	v.partial += p
	for {
		i := strings.IndexByte(v.partial, '\n')
		if i < 0 {
			return
		}
		r.outputLine(v, v.partial[:i])
		v.partial = v.partial[i+1:]
	}
}

func (r *humanRenderer) outputLine(v *callView, l string) {
	v.shown = true
	if v.lines < maxLiveLines {
		r.line(styleDim, "  │ "+oneLine(l, maxLineChars))
		v.lines++
		return
	}
	if v.hidden == 0 {
		r.line(styleDim, "  │ … (more output: its last lines are shown when the call ends)")
	}
	v.hidden++
	v.tail = append(v.tail, l)
	if len(v.tail) > maxResultLines {
		v.tail = v.tail[1:]
	}
}

func (r *humanRenderer) flushPartial(v *callView) {
	if v.partial != "" {
		r.outputLine(v, v.partial)
		v.partial = ""
	}
}

// flushTail shows the last lines of output that went beyond maxLiveLines.
func (r *humanRenderer) flushTail(v *callView) {
	if v.hidden == 0 {
		return
	}
	if n := v.hidden - len(v.tail); n > 0 {
		r.line(styleDim, fmt.Sprintf("  │ … (%d lines not shown)", n))
	}
	for _, l := range v.tail {
		r.line(styleDim, "  │ "+oneLine(l, maxLineChars))
	}
	v.hidden, v.tail = 0, nil
}

// block shows text after a label, cut to a few lines.
func (r *humanRenderer) block(label, style, text string) {
	lines := strings.Split(strings.TrimRight(clean(text), "\n"), "\n")
	more := 0
	if len(lines) > maxResultLines {
		more = len(lines) - maxResultLines
		lines = lines[:maxResultLines]
	}
	r.newline()
	r.write(r.styled(style, label) + truncate(lines[0], maxLineChars) + "\n")
	pad := strings.Repeat(" ", utf8.RuneCountInString(label))
	for _, l := range lines[1:] {
		r.write(pad + truncate(l, maxLineChars) + "\n")
	}
	if more > 0 {
		r.write(pad + r.styled(styleDim, fmt.Sprintf("… (%d more lines)", more)) + "\n")
	}
}

func (r *humanRenderer) endTurn() {
	r.newline()
	r.scope, r.indent = "", ""
}

// clean removes control characters other than newline and tab, so that a
// model or a tool cannot drive the terminal with escape sequences.
func clean(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		// 0xc2 starts the C1 controls U+0080..U+009F (and some letters).
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == 0xc2 {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

// oneLine cleans s, folds it onto one line and truncates it.
func oneLine(s string, n int) string {
	return truncate(strings.NewReplacer("\n", " ", "\t", " ").Replace(clean(s)), n)
}

// truncate cuts s to n runes, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}
