package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ResponsesPath is the URL path where the server answers the Responses
// API (Open Responses): the path openai-go's Responses.NewStreaming posts
// to under [Server.URL].
const ResponsesPath = "/v1/responses"

// The Responses form of a Builder's reply. Finish renders it beside the
// chat-completions chunks, so one scripted Response answers either API.
//
// A stream is response.created, response.in_progress, then one output
// item per run of parts: consecutive Reasoning pieces make a reasoning
// item (its summary text streams as response.reasoning_summary_text.delta),
// consecutive Text pieces a message item (response.output_text.delta),
// and each tool call (by index) a function_call item
// (response.function_call_arguments.delta). Each item is announced with
// response.output_item.added and ends with response.output_item.done. The
// stream ends with response.completed, or response.incomplete for the
// finish reasons "length" (incomplete_details.reason "max_output_tokens")
// and "content_filter"; an empty finish reason sends no final event, as a
// cut stream would. The usage goes on the final event's response.

// respItem is one output item being rendered.
type respItem struct {
	kind      partKind
	id        string
	index     int // output_index
	callIndex int // the Builder's call index, for calls
	callID    string
	name      string
	text      strings.Builder
	open      bool
}

// respRender accumulates the events of a Responses stream.
type respRender struct {
	b      *Builder
	respID string
	frames [][]byte
	seq    int
	items  []*respItem
}

// responsesForm renders the Responses stream and the final response
// object of b's reply with the finish reason.
func (b *Builder) responsesForm(reason string) (frames [][]byte, object []byte) {
	r := &respRender{b: b, respID: responsesID(b.id)}
	r.event("response.created", "response", r.object("in_progress", "", false))
	r.event("response.in_progress", "response", r.object("in_progress", "", false))
	var cur *respItem // the open text or reasoning item
	closeCur := func() {
		if cur != nil {
			r.closeItem(cur)
			cur = nil
		}
	}
	closeCalls := func() {
		for _, it := range r.items {
			if it.open && it.kind == partCall {
				r.closeItem(it)
			}
		}
	}
	for _, p := range b.parts {
		switch p.kind {
		case partText, partReasoning:
			closeCalls()
			if cur == nil || cur.kind != p.kind {
				closeCur()
				cur = r.openItem(p.kind, fragment{})
			}
			cur.text.WriteString(p.text)
			if p.kind == partText {
				r.event("response.output_text.delta", "item_id", cur.id, "output_index", cur.index, "content_index", 0, "delta", p.text, "logprobs", []any{})
			} else {
				r.event("response.reasoning_summary_text.delta", "item_id", cur.id, "output_index", cur.index, "summary_index", 0, "delta", p.text)
			}
		case partCall:
			closeCur()
			it := r.callItem(p.call)
			if it == nil || (p.call.header && it.name != "") {
				it = r.openItem(partCall, p.call)
			}
			if p.call.args != "" {
				it.text.WriteString(p.call.args)
				r.event("response.function_call_arguments.delta", "item_id", it.id, "output_index", it.index, "delta", p.call.args)
			}
		}
	}
	closeCur()
	closeCalls()
	var final []byte
	switch reason {
	case "":
		final = r.object("in_progress", "", true)
	case "length":
		final = r.object("incomplete", "max_output_tokens", true)
		r.event("response.incomplete", "response", json.RawMessage(final))
	case "content_filter":
		final = r.object("incomplete", "content_filter", true)
		r.event("response.incomplete", "response", json.RawMessage(final))
	default:
		final = r.object("completed", "", true)
		r.event("response.completed", "response", json.RawMessage(final))
	}
	return r.frames, final
}

// responsesID turns a chatcmpl id into a resp id.
func responsesID(id string) string {
	if rest, ok := strings.CutPrefix(id, "chatcmpl-"); ok {
		return "resp_" + rest
	}
	return id
}

// callItem returns the open function_call item of the call f belongs to.
func (r *respRender) callItem(f fragment) *respItem {
	for i := len(r.items) - 1; i >= 0; i-- {
		it := r.items[i]
		if it.open && it.kind == partCall && it.callIndex == f.index && (f.id == "" || it.callID == "" || it.callID == f.id) {
			return it
		}
	}
	return nil
}

// openItem starts an output item of kind.
func (r *respRender) openItem(kind partKind, f fragment) *respItem {
	n := len(r.items)
	it := &respItem{kind: kind, index: n, open: true, callIndex: f.index, callID: f.id, name: f.name}
	switch kind {
	case partText:
		it.id = fmt.Sprintf("msg_%s_%d", r.respID, n)
	case partReasoning:
		it.id = fmt.Sprintf("rs_%s_%d", r.respID, n)
	case partCall:
		it.id = fmt.Sprintf("fc_%s_%d", r.respID, n)
	}
	r.items = append(r.items, it)
	r.event("response.output_item.added", "output_index", it.index, "item", it.json("in_progress"))
	switch kind {
	case partText:
		r.event("response.content_part.added", "item_id", it.id, "output_index", it.index, "content_index", 0,
			"part", obj("type", "output_text", "text", "", "annotations", []any{}))
	case partReasoning:
		r.event("response.reasoning_summary_part.added", "item_id", it.id, "output_index", it.index, "summary_index", 0,
			"part", obj("type", "summary_text", "text", ""))
	}
	return it
}

// closeItem ends an output item with its done events.
func (r *respRender) closeItem(it *respItem) {
	it.open = false
	text := it.text.String()
	switch it.kind {
	case partText:
		r.event("response.output_text.done", "item_id", it.id, "output_index", it.index, "content_index", 0, "text", text, "logprobs", []any{})
		r.event("response.content_part.done", "item_id", it.id, "output_index", it.index, "content_index", 0,
			"part", obj("type", "output_text", "text", text, "annotations", []any{}))
	case partReasoning:
		r.event("response.reasoning_summary_text.done", "item_id", it.id, "output_index", it.index, "summary_index", 0, "text", text)
		r.event("response.reasoning_summary_part.done", "item_id", it.id, "output_index", it.index, "summary_index", 0,
			"part", obj("type", "summary_text", "text", text))
	case partCall:
		r.event("response.function_call_arguments.done", "item_id", it.id, "output_index", it.index, "name", it.name, "arguments", text)
	}
	r.event("response.output_item.done", "output_index", it.index, "item", it.json("completed"))
}

// json renders the item as an output item with its content so far.
func (it *respItem) json(status string) json.RawMessage {
	text := it.text.String()
	switch it.kind {
	case partText:
		content := []any{}
		if status == "completed" {
			content = append(content, obj("type", "output_text", "text", text, "annotations", []any{}))
		}
		return obj("id", it.id, "type", "message", "status", status, "role", "assistant", "content", content)
	case partReasoning:
		summary := []any{}
		if status == "completed" {
			summary = append(summary, obj("type", "summary_text", "text", text))
		}
		return obj("id", it.id, "type", "reasoning", "summary", summary)
	default:
		return obj("id", it.id, "type", "function_call", "status", status, "call_id", it.callID, "name", it.name, "arguments", text)
	}
}

// object renders the response object with status; final adds the output
// items and the usage.
func (r *respRender) object(status, incomplete string, final bool) json.RawMessage {
	output := []any{}
	var usage any
	if final {
		for _, it := range r.items {
			output = append(output, it.json("completed"))
		}
		if u := r.b.usage; u != nil {
			var cached, reasoning int64
			if u.PromptDetails != nil {
				cached = u.PromptDetails.CachedTokens
			}
			if u.CompletionDetails != nil {
				reasoning = u.CompletionDetails.ReasoningTokens
			}
			usage = obj("input_tokens", u.PromptTokens, "input_tokens_details", obj("cached_tokens", cached),
				"output_tokens", u.CompletionTokens, "output_tokens_details", obj("reasoning_tokens", reasoning),
				"total_tokens", u.TotalTokens)
		}
	}
	var details any
	if incomplete != "" {
		details = obj("reason", incomplete)
	}
	return obj("id", r.respID, "object", "response", "created_at", r.b.created, "status", status,
		"error", nil, "incomplete_details", details, "model", r.b.model, "output", output,
		"parallel_tool_calls", true, "tool_choice", "auto", "tools", []any{}, "usage", usage)
}

// event appends one SSE event of type typ with the fields kv (name, value
// pairs) and the next sequence_number.
func (r *respRender) event(typ string, kv ...any) {
	kv = append([]any{"type", typ}, kv...)
	kv = append(kv, "sequence_number", r.seq)
	r.seq++
	r.frames = append(r.frames, eventFrame(typ, obj(kv...)))
}

// eventFrame renders "event: typ" and "data: data" as one SSE event.
func eventFrame(typ string, data []byte) []byte {
	out := make([]byte, 0, len(typ)+len(data)+16)
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, "\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// responsesErrorFrame renders an error event for [Response.ErrorAfter]
// in a Responses stream: seq is its sequence_number.
func responsesErrorFrame(message string, seq int) []byte {
	return eventFrame("error", obj("type", "error", "code", "server_error", "message", message, "param", nil, "sequence_number", seq))
}

// obj renders a JSON object with the fields kv (name, value pairs) in
// order.
func obj(kv ...any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(kv[i].(string)))
		b.WriteByte(':')
		v, err := json.Marshal(kv[i+1])
		if err != nil { // only strings, numbers and objects of them
			v = []byte("null")
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
