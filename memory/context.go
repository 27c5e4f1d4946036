package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultTruncateLimit is the number of characters old tool arguments and
// results are cut to when [TruncateOptions.Limit] is zero.
const DefaultTruncateLimit = 300

// TruncateOptions say how [Truncate] shortens old tool traffic and old
// images. The zero value truncates at [DefaultTruncateLimit] characters,
// keeps no tool whole and sends no image of an earlier turn again.
type TruncateOptions struct {
	// Limit is the number of characters (runes) kept of an old tool
	// result or tool-call arguments text. Zero means DefaultTruncateLimit;
	// a negative Limit turns the truncation of text off.
	Limit int
	// Keep names tools whose arguments and results are never truncated,
	// such as "get_skill".
	Keep []string
	// KeepImages sends the images of earlier turns again with every
	// request, so the model can look at them again; each costs its tokens
	// (and its bytes) in every request. By default they are replaced by a
	// line of text.
	KeepImages bool
}

// limit returns the effective limit, or -1 when truncation is off.
func (o TruncateOptions) limit() int {
	switch {
	case o.Limit == 0:
		return DefaultTruncateLimit
	case o.Limit < 0:
		return -1
	}
	return o.Limit
}

// CurrentTurn returns the index where the current turn of msgs starts: the
// last user message that is not a hook injection. With no such message the
// whole list is the current turn and CurrentTurn returns 0.
func CurrentTurn(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser && !msgs[i].Hook {
			return i
		}
	}
	return 0
}

// Truncate returns msgs with old tool traffic shortened, and old images
// left out, for the next request. Old means before the current turn (see
// [CurrentTurn]); the current turn's messages are never touched.
//
// An old message's images, unless opts.KeepImages, are replaced by one line
// each at the end of its content, such as "[earlier image: image/png, 48
// KB]" (see [Image.String]), so the model knows they were there.
//
// A tool message's content longer than the limit keeps its first Limit
// characters followed by "…[truncated N chars]". Tool-call arguments longer
// than the limit are replaced by a JSON object that stays valid JSON:
// {"truncated":"<first Limit characters>…[truncated N chars]"}. Tools named
// in opts.Keep are left whole; a tool message's tool is found through its
// call id, in the latest assistant message before it first (ids may repeat
// across messages), else anywhere in msgs, else by its Name.
//
// Truncate never changes msgs; the result shares no memory with it.
func Truncate(msgs []Message, opts TruncateOptions) []Message {
	end := CurrentTurn(msgs)
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if i < end && !opts.KeepImages && len(m.Images) > 0 {
			// Replaced before the copy: old image bytes are not copied.
			lines := make([]string, len(m.Images))
			for k, img := range m.Images {
				lines[k] = imagePlaceholder(img)
			}
			m.Content = joinContent(m.Content, strings.Join(lines, "\n"))
			m.Images = nil
		}
		out[i] = m.clone()
	}
	limit := opts.limit()
	if limit < 0 {
		return out
	}
	names := make(map[string]string) // call id → tool name, latest call wins
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	var last []ToolCall // the calls of the latest assistant message
	for i := range out[:end] {
		m := &out[i]
		switch {
		case m.Role == RoleTool:
			// Ids repeat across messages (servers that number calls
			// call_0, call_1, ... per response): the call a tool message
			// answers is the one of the assistant message before it.
			name, ok := callName(last, m.ToolCallID)
			if !ok {
				name, ok = names[m.ToolCallID]
			}
			if !ok {
				name = m.Name
			}
			if !slices.Contains(opts.Keep, name) {
				m.Content = cut(m.Content, limit)
			}
		case m.Role == RoleAssistant:
			last = msgs[i].ToolCalls
			for k, c := range m.ToolCalls {
				if slices.Contains(opts.Keep, c.Name) || utf8.RuneCount(c.Arguments) <= limit {
					continue
				}
				b, _ := json.Marshal(struct {
					Truncated string `json:"truncated"`
				}{cut(string(c.Arguments), limit)}) // a struct of a string cannot fail
				m.ToolCalls[k].Arguments = b
			}
		}
	}
	return out
}

// callName returns the name of the call with the given id in calls.
func callName(calls []ToolCall, id string) (string, bool) {
	for _, c := range calls {
		if c.ID == id {
			return c.Name, true
		}
	}
	return "", false
}

// cut returns s cut to limit runes with a note of how many were removed.
func cut(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	i, k := 0, 0
	for k < limit {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		k++
	}
	return fmt.Sprintf("%s…[truncated %d chars]", s[:i], n-limit)
}

// Layer adds system blocks to the context before the history: a list of
// known documents, skill descriptions, summaries of earlier conversation.
// The agent (package agent, Config.Layers) asks its layers once per run, and
// sends each block as a system message after the system prompt.
//
// Blocks is called for the session of the run, possibly from several
// goroutines at once for different sessions. Blocks that are empty or only
// white space are left out. An error ends the run before its first request.
type Layer interface {
	Blocks(ctx context.Context, sessionID string) ([]string, error)
}

// LayerFunc adapts a function to [Layer].
type LayerFunc func(ctx context.Context, sessionID string) ([]string, error)

// Blocks calls f(ctx, sessionID).
func (f LayerFunc) Blocks(ctx context.Context, sessionID string) ([]string, error) {
	return f(ctx, sessionID)
}

// TextLayer is a [Layer] of fixed blocks, the same for every session.
type TextLayer []string

// Blocks returns a copy of l.
func (l TextLayer) Blocks(context.Context, string) ([]string, error) {
	return slices.Clone(l), nil
}

// DefaultSummaryPrefix starts the block of a [SummaryLayer] with no Prefix.
const DefaultSummaryPrefix = "Summary of earlier conversation:"

// SummaryLayer is a [Layer] that brings a session's long-term summaries
// back into the context: one block holding Prefix and every summary, oldest
// first, separated by blank lines. A session without summaries gets no
// block.
type SummaryLayer struct {
	// Store holds the summaries.
	Store Store
	// Prefix starts the block; empty means DefaultSummaryPrefix.
	Prefix string
}

// Blocks implements [Layer].
func (l SummaryLayer) Blocks(ctx context.Context, sessionID string) ([]string, error) {
	if l.Store == nil {
		return nil, errors.New("memory: SummaryLayer has no Store")
	}
	sums, err := l.Store.Summaries(ctx, sessionID)
	if err != nil || len(sums) == 0 {
		return nil, err
	}
	prefix := l.Prefix
	if prefix == "" {
		prefix = DefaultSummaryPrefix
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, s := range sums {
		b.WriteString("\n\n")
		b.WriteString(s.Content)
	}
	return []string{b.String()}, nil
}
