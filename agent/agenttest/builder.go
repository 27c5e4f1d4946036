package agenttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Builder assembles a streamed chat-completions answer in OpenAI's chunk
// shape. Start one with [Reply], add deltas in the order they should
// stream, and end with [Builder.Finish], which renders the frames once and
// returns the [Response].
//
// Each Text, Reasoning or tool-call fragment is one chunk. The first chunk
// also carries "role":"assistant". After the deltas come the finish chunk
// (an empty delta with finish_reason) and, when usage was set, a
// usage-only chunk with empty choices, then [DONE].
//
// A Builder is not safe for concurrent use.
type Builder struct {
	id, model string
	created   int64
	parts     []part
	usage     *usageJSON

	wholeCalls     bool
	omitIndex      bool
	idEvery        bool
	finishWithLast bool
	usageInFinish  bool
	emptyFirst     bool
}

type partKind uint8

const (
	partText partKind = iota
	partReasoning
	partCall
)

type part struct {
	kind partKind
	text string
	call fragment
}

// fragment is one tool-call fragment as the builder will render it.
type fragment struct {
	index    int
	id, name string
	args     string
	header   bool // first fragment of a Call: carries type "function"
}

var responseSeq atomic.Int64

// Reply starts a [Builder] with a fresh chatcmpl id and the model name
// "agenttest".
func Reply() *Builder {
	return &Builder{
		id:      fmt.Sprintf("chatcmpl-agenttest%d", responseSeq.Add(1)),
		model:   "agenttest",
		created: time.Now().Unix(),
	}
}

// ID sets the chunks' id.
func (b *Builder) ID(id string) *Builder { b.id = id; return b }

// Model sets the chunks' model name.
func (b *Builder) Model(model string) *Builder { b.model = model; return b }

// Text adds one content delta per piece.
func (b *Builder) Text(pieces ...string) *Builder {
	for _, p := range pieces {
		b.parts = append(b.parts, part{kind: partText, text: p})
	}
	return b
}

// Reasoning adds one reasoning_content delta per piece.
func (b *Builder) Reasoning(pieces ...string) *Builder {
	for _, p := range pieces {
		b.parts = append(b.parts, part{kind: partReasoning, text: p})
	}
	return b
}

// Call adds a tool call the way OpenAI streams it: a header fragment with
// index, id, type and name and empty arguments, then one fragment per
// piece of argument text. Arguments may be split anywhere, even inside a
// JSON string or a multi-byte character's escape. [CallTool] is the short
// form of a reply with one call.
//
// A Response with calls answers only a request that offers the tools it
// calls (see [Response.Unsolicited]); an agent's planning round offers
// none, so a run's script has a planning reply ([Plan]) first.
func (b *Builder) Call(index int, id, name string, args ...string) *Builder {
	b.parts = append(b.parts, part{kind: partCall, call: fragment{index: index, id: id, name: name, header: true}})
	for _, a := range args {
		b.parts = append(b.parts, part{kind: partCall, call: fragment{index: index, id: id, args: a}})
	}
	return b
}

// Fragment adds one raw tool-call fragment: any of id, name and args may
// be empty. Use it to interleave fragments of parallel calls.
func (b *Builder) Fragment(index int, id, name, args string) *Builder {
	b.parts = append(b.parts, part{kind: partCall, call: fragment{index: index, id: id, name: name, args: args, header: name != ""}})
	return b
}

// Usage sets the token usage reported at the end.
func (b *Builder) Usage(promptTokens, completionTokens int64) *Builder {
	u := b.usageJSON()
	u.PromptTokens, u.CompletionTokens, u.TotalTokens = promptTokens, completionTokens, promptTokens+completionTokens
	return b
}

// CachedTokens reports n of the prompt tokens as read from the provider's
// prompt cache, as OpenAI does: usage.prompt_tokens_details.cached_tokens
// (with audio_tokens 0 beside it). n is part of the prompt tokens set with
// [Builder.Usage], not added to them.
func (b *Builder) CachedTokens(n int64) *Builder {
	b.usageJSON().PromptDetails = &promptDetailsJSON{CachedTokens: n}
	return b
}

// ReasoningTokens reports n of the completion tokens as spent reasoning, as
// OpenAI does: usage.completion_tokens_details.reasoning_tokens (with the
// other details 0 beside it). n is part of the completion tokens set with
// [Builder.Usage], not added to them.
func (b *Builder) ReasoningTokens(n int64) *Builder {
	b.usageJSON().CompletionDetails = &completionDetailsJSON{ReasoningTokens: n}
	return b
}

// usageJSON returns the usage reported at the end, setting it first.
func (b *Builder) usageJSON() *usageJSON {
	if b.usage == nil {
		b.usage = new(usageJSON)
	}
	return b.usage
}

// WholeCalls merges each [Builder.Call] into a single fragment holding the
// id, name and the whole arguments (Groq, Ollama, Mistral).
func (b *Builder) WholeCalls() *Builder { b.wholeCalls = true; return b }

// OmitIndex leaves "index" out of every tool-call fragment (Mistral).
func (b *Builder) OmitIndex() *Builder { b.omitIndex = true; return b }

// IDOnEveryFragment repeats the call's id (and type) on every fragment,
// not only the first.
func (b *Builder) IDOnEveryFragment() *Builder { b.idEvery = true; return b }

// FinishWithLast puts finish_reason on the last delta chunk instead of a
// separate chunk with an empty delta.
func (b *Builder) FinishWithLast() *Builder { b.finishWithLast = true; return b }

// UsageInFinish puts the usage on the finish chunk instead of a separate
// usage-only chunk with empty choices (Groq, DeepSeek).
func (b *Builder) UsageInFinish() *Builder { b.usageInFinish = true; return b }

// EmptyFirstChunk starts the stream with a chunk whose choices are empty
// and that carries prompt_filter_results (Azure).
func (b *Builder) EmptyFirstChunk() *Builder { b.emptyFirst = true; return b }

// Finish renders the answer with the finish reason ("stop", "tool_calls",
// "length", ...) and returns it as a [Response] that ends with [DONE].
// An empty reason sends no finish_reason at all, as a cut stream would.
//
// The Response also has a non-streaming form: a request with
// "stream":false gets the same answer as one chat.completion object. And
// it has the Responses API's forms, an Open Responses event stream and a
// response object, for a request to [ResponsesPath] (the package
// documentation lists the events); the chat-chunk switches above do not
// change them.
func (b *Builder) Finish(reason string) Response {
	var chunks []chunkJSON
	if b.emptyFirst {
		chunks = append(chunks, chunkJSON{Choices: []choiceJSON{}, PromptFilterResults: []any{
			map[string]any{"prompt_index": 0, "content_filter_results": map[string]any{}},
		}})
	}
	for _, p := range b.merged() {
		var d deltaJSON
		switch p.kind {
		case partText:
			d.Content = &p.text
		case partReasoning:
			d.ReasoningContent = p.text
		case partCall:
			d.ToolCalls = []toolCallJSON{b.renderFragment(p.call)}
		}
		chunks = append(chunks, b.chunk(d))
	}
	var reasonPtr *string
	if reason != "" {
		reasonPtr = &reason
	}
	// finish_reason goes on the last delta chunk or on a chunk of its own.
	if b.finishWithLast && len(b.parts) > 0 {
		chunks[len(chunks)-1].Choices[0].FinishReason = reasonPtr
	} else if reason != "" || (b.usage != nil && b.usageInFinish) {
		chunks = append(chunks, b.chunk(deltaJSON{}))
		chunks[len(chunks)-1].Choices[0].FinishReason = reasonPtr
	}
	if b.usage != nil {
		if b.usageInFinish {
			chunks[len(chunks)-1].Usage = b.usage
		} else {
			chunks = append(chunks, chunkJSON{ID: b.id, Object: "chat.completion.chunk", Created: b.created, Model: b.model, Choices: []choiceJSON{}, Usage: b.usage})
		}
	}
	if n := firstChoiceChunk(chunks); n >= 0 {
		chunks[n].Choices[0].Delta.Role = "assistant"
	}

	r := Response{done: true, frames: make([][]byte, len(chunks))}
	for i := range chunks {
		r.frames[i] = renderFrame(&chunks[i])
	}
	r.completion = b.completion(reason)
	r.respFrames, r.respObject = b.responsesForm(reason)
	var text strings.Builder
	for _, p := range b.parts {
		switch {
		case p.kind == partText && text.Len() < maxDescribed:
			text.WriteString(p.text)
		case p.kind == partCall && p.call.name != "":
			r.calls = append(r.calls, p.call.name)
		}
	}
	r.text = text.String()
	return r
}

// merged returns the parts, with each Call folded into one fragment when
// WholeCalls is set.
func (b *Builder) merged() []part {
	if !b.wholeCalls {
		return b.parts
	}
	var out []part
	for _, p := range b.parts {
		if p.kind == partCall && !p.call.header && len(out) > 0 {
			prev := &out[len(out)-1]
			if prev.kind == partCall && prev.call.index == p.call.index && prev.call.id == p.call.id {
				prev.call.args += p.call.args
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

func (b *Builder) renderFragment(f fragment) toolCallJSON {
	tc := toolCallJSON{Function: functionJSON{Name: f.name, Arguments: f.args}}
	if !b.omitIndex {
		idx := f.index
		tc.Index = &idx
	}
	if f.header || b.idEvery {
		tc.ID = f.id
		tc.Type = "function"
	}
	return tc
}

func (b *Builder) chunk(d deltaJSON) chunkJSON {
	return chunkJSON{
		ID: b.id, Object: "chat.completion.chunk", Created: b.created, Model: b.model,
		Choices: []choiceJSON{{Delta: d}},
	}
}

func firstChoiceChunk(chunks []chunkJSON) int {
	for i := range chunks {
		if len(chunks[i].Choices) > 0 {
			return i
		}
	}
	return -1
}

// completion renders the non-streaming chat.completion object.
func (b *Builder) completion(reason string) []byte {
	var content, reasoning strings.Builder
	var calls []*messageCallJSON
	byKey := map[string]*messageCallJSON{}
	for _, p := range b.parts {
		switch p.kind {
		case partText:
			content.WriteString(p.text)
		case partReasoning:
			reasoning.WriteString(p.text)
		case partCall:
			key := fmt.Sprint(p.call.index)
			if b.omitIndex {
				key = p.call.id // without an index, a call is known by its id
			}
			c := byKey[key]
			if c == nil || (p.call.header && c.Function.Name != "") {
				c = &messageCallJSON{Type: "function"}
				byKey[key] = c
				calls = append(calls, c)
			}
			if p.call.id != "" {
				c.ID = p.call.id
			}
			c.Function.Name += p.call.name
			c.Function.Arguments += p.call.args
		}
	}
	msg := messageJSON{Role: "assistant", ToolCalls: calls}
	if content.Len() > 0 || len(calls) == 0 {
		s := content.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoning.String()
	var reasonPtr *string
	if reason != "" {
		reasonPtr = &reason
	}
	out := completionJSON{
		ID: b.id, Object: "chat.completion", Created: b.created, Model: b.model,
		Choices: []completionChoiceJSON{{Message: msg, FinishReason: reasonPtr}},
		Usage:   b.usage,
	}
	bs, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return bs
}

func renderFrame(c *chunkJSON) []byte {
	b, err := json.Marshal(c)
	if err != nil { // only strings and numbers: cannot fail
		b = errorBody("agenttest: cannot render chunk: "+err.Error(), "server_error", "")
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// The JSON shapes of OpenAI's chunks, in its field order.
type (
	chunkJSON struct {
		ID                  string       `json:"id"`
		Object              string       `json:"object"`
		Created             int64        `json:"created"`
		Model               string       `json:"model"`
		PromptFilterResults []any        `json:"prompt_filter_results,omitempty"`
		Choices             []choiceJSON `json:"choices"`
		Usage               *usageJSON   `json:"usage,omitempty"`
	}
	choiceJSON struct {
		Index        int       `json:"index"`
		Delta        deltaJSON `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	}
	deltaJSON struct {
		Role             string         `json:"role,omitempty"`
		Content          *string        `json:"content,omitempty"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
	}
	toolCallJSON struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function functionJSON `json:"function"`
	}
	functionJSON struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	usageJSON struct {
		PromptTokens      int64                  `json:"prompt_tokens"`
		CompletionTokens  int64                  `json:"completion_tokens"`
		TotalTokens       int64                  `json:"total_tokens"`
		PromptDetails     *promptDetailsJSON     `json:"prompt_tokens_details,omitempty"`
		CompletionDetails *completionDetailsJSON `json:"completion_tokens_details,omitempty"`
	}
	promptDetailsJSON struct {
		CachedTokens int64 `json:"cached_tokens"`
		AudioTokens  int64 `json:"audio_tokens"`
	}
	completionDetailsJSON struct {
		ReasoningTokens          int64 `json:"reasoning_tokens"`
		AudioTokens              int64 `json:"audio_tokens"`
		AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
	}
	completionJSON struct {
		ID      string                 `json:"id"`
		Object  string                 `json:"object"`
		Created int64                  `json:"created"`
		Model   string                 `json:"model"`
		Choices []completionChoiceJSON `json:"choices"`
		Usage   *usageJSON             `json:"usage,omitempty"`
	}
	completionChoiceJSON struct {
		Index        int         `json:"index"`
		Message      messageJSON `json:"message"`
		FinishReason *string     `json:"finish_reason"`
	}
	messageJSON struct {
		Role             string             `json:"role"`
		Content          *string            `json:"content"`
		ReasoningContent string             `json:"reasoning_content,omitempty"`
		ToolCalls        []*messageCallJSON `json:"tool_calls,omitempty"`
	}
	messageCallJSON struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
)
