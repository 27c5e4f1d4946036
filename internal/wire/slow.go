package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/planround/planround/stream"
)

// The reference decoding of a chunk, with encoding/json. The fast decoder
// must agree with it on every frame it accepts.
type chunkJSON struct {
	Choices []choiceJSON    `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choiceJSON struct {
	Index        int        `json:"index"`
	Delta        *deltaJSON `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

type deltaJSON struct {
	Content          string          `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCallJSON  `json:"tool_calls"`
}

type toolCallJSON struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type usageJSON struct {
	PromptTokens     json.RawMessage `json:"prompt_tokens"`
	CompletionTokens json.RawMessage `json:"completion_tokens"`
	TotalTokens      json.RawMessage `json:"total_tokens"`
	PromptDetails    json.RawMessage `json:"prompt_tokens_details"`
	OutputDetails    json.RawMessage `json:"completion_tokens_details"`
}

// The details objects of a usage; each detail is read leniently, like the
// counts, and a details value that is not an object counts as none.
type promptDetailsJSON struct {
	CachedTokens     json.RawMessage `json:"cached_tokens"`
	CacheWriteTokens json.RawMessage `json:"cache_write_tokens"`
}

type outputDetailsJSON struct {
	ReasoningTokens json.RawMessage `json:"reasoning_tokens"`
}

// slowDecode decodes one frame with encoding/json into d. It returns a
// *StreamError for an error frame and a descriptive error for a frame that
// is not a valid chunk.
func slowDecode(data []byte, d *stream.Delta) error {
	d.Content, d.Reasoning, d.FinishReason, d.Usage = "", "", "", nil
	d.ToolCalls = d.ToolCalls[:0]

	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("wire: bad frame: %w (data: %s)", err, excerpt(data))
	}
	if len(c.Error) > 0 && !isNull(c.Error) {
		return newStreamError(c.Error, data)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		// Should several choices claim index 0, they are taken in order as
		// one; the last finish_reason wins.
		d.FinishReason = firstNonEmpty(ch.FinishReason, d.FinishReason)
		if ch.Delta == nil {
			continue
		}
		dl := ch.Delta
		d.Content += dl.Content
		r := rawText(dl.ReasoningContent)
		if r == "" {
			r = rawText(dl.Reasoning)
		}
		d.Reasoning += r
		for _, tc := range dl.ToolCalls {
			t := stream.ToolCallDelta{Index: stream.NoIndex, ID: tc.ID, Name: tc.Function.Name}
			if tc.Index != nil {
				t.Index = *tc.Index
			}
			t.Arguments = argumentsText(tc.Function.Arguments)
			if !emptyCall(t) {
				d.ToolCalls = append(d.ToolCalls, t)
			}
		}
	}
	u, err := usage(c.Usage, data)
	d.Usage = u
	return err
}

// usage decodes the usage value raw of the frame or body data: nil when
// it is absent or not an object.
func usage(raw json.RawMessage, data []byte) (*stream.Usage, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	var u usageJSON
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("wire: bad usage in frame: %w (data: %s)", err, excerpt(data))
	}
	var p promptDetailsJSON
	var o outputDetailsJSON
	if len(u.PromptDetails) > 0 && u.PromptDetails[0] == '{' {
		_ = json.Unmarshal(u.PromptDetails, &p) // cannot fail: raw fields only
	}
	if len(u.OutputDetails) > 0 && u.OutputDetails[0] == '{' {
		_ = json.Unmarshal(u.OutputDetails, &o)
	}
	return &stream.Usage{
		PromptTokens:     tokens(u.PromptTokens),
		CompletionTokens: tokens(u.CompletionTokens),
		TotalTokens:      tokens(u.TotalTokens),
		CacheReadTokens:  tokens(p.CachedTokens),
		CacheWriteTokens: tokens(p.CacheWriteTokens),
		ReasoningTokens:  tokens(o.ReasoningTokens),
	}, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// rawText returns the text of a JSON string value, and "" for null or any
// other value.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// argumentsText returns a function's arguments: the text of a JSON string,
// "" for null, or the JSON text of any other value (some servers send the
// arguments object itself).
func argumentsText(raw json.RawMessage) string {
	switch {
	case len(raw) == 0 || isNull(raw):
		return ""
	case raw[0] == '"':
		return rawText(raw)
	}
	return string(raw)
}

// tokens reads a token count leniently: an integer, a float (truncated), or
// 0 for anything else.
func tokens(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0
	}
	return int64(f)
}

// excerpt returns a short quoted excerpt of data for error messages.
func excerpt(data []byte) string {
	const max = 80
	if len(data) > max {
		return strconv.Quote(string(data[:max])) + "..."
	}
	return strconv.Quote(string(data))
}
