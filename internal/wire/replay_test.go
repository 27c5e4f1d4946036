package wire_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/stream"
)

// result is everything one stream yields through Reader, Parser and
// Accumulator, the way the agent consumes it.
type result struct {
	text, raw, reasoning string
	pieces               []stream.Piece
	calls                []stream.Call
	started              []string // names, in the order start was reported
	finish               string
	usage                *stream.Usage
	err                  error // the error Next ended with (io.EOF on success)
}

func consume(t *testing.T, body io.Reader, mode stream.Mode) result {
	t.Helper()
	var (
		res  result
		acc  stream.Accumulator
		text strings.Builder
		rsn  strings.Builder
	)
	p := stream.NewParser(stream.Config{Mode: mode})
	emit := func(pc stream.Piece) {
		res.pieces = append(res.pieces, pc)
		text.WriteString(pc.Text)
	}
	r := wire.NewReader(body)
	for {
		d, err := r.Next()
		if err != nil {
			res.err = err
			break
		}
		rsn.WriteString(d.Reasoning)
		p.Write(d.Content, emit)
		for _, tc := range d.ToolCalls {
			slot, started := acc.Add(tc)
			if started {
				res.started = append(res.started, acc.Call(slot).Name)
			}
		}
		if d.FinishReason != "" {
			res.finish = d.FinishReason
		}
		if d.Usage != nil {
			u := *d.Usage
			res.usage = &u
		}
	}
	p.Flush(emit)
	res.text, res.raw, res.reasoning = text.String(), p.Raw(), rsn.String()
	res.calls = acc.Calls()
	if got := r.FinishReason(); got != res.finish {
		t.Errorf("Reader.FinishReason() = %q, want %q (last seen on a delta)", got, res.finish)
	}
	return res
}

// call is an expected tool call; id "" means "a generated id".
type call struct {
	index          int
	id, name, args string
}

type want struct {
	text      string
	reasoning string // "" = none
	calls     []call
	finish    string
	usage     *stream.Usage // nil = none reported
	err       error         // io.EOF unless the stream is cut
}

// The expectations below were worked out by reading each file (see
// testdata/streams/SOURCES.md for what each shows).
var replayWant = map[string]want{
	"anthropic-compat-tool-index-starts-at-1.sse": {
		text:   "Reading it.",
		calls:  []call{{1, "toolu_sanitized", "read_file", `{"path": "a.txt"}`}},
		finish: "tool_calls",
	},
	"azure-empty-choices-content-filter-usage-chunk.sse": {
		text:   "Hello World",
		finish: "stop",
		usage:  &stream.Usage{PromptTokens: 15, CompletionTokens: 5, TotalTokens: 20},
	},
	// No [DONE], but a finish_reason: a clean end.
	"azure-gpt4o-tool-call-prompt-filter-first-chunk-no-done.sse": {
		calls:  []call{{0, "call_BwRBL2i8SUeS8zaK7AgYGFDG", "adder", `{"a":2,"b":3}`}},
		finish: "tool_calls",
	},
	// Cached prompt tokens (prompt_tokens_details.cached_tokens) and
	// reasoning tokens (completion_tokens_details.reasoning_tokens) beside
	// DeepSeek's own prompt_cache_hit_tokens, which is not read.
	"deepseek-v4-reasoning-then-tool-call.sse": {
		reasoning: "The user asks about the weather in San Francisco. I should use the weather tool.",
		calls:     []call{{0, "call_00_IhCAliIHtM9gKpgfqbBV9873", "weather", `{"location": "San Francisco"}`}},
		finish:    "tool_calls",
		usage:     &stream.Usage{PromptTokens: 374, CompletionTokens: 61, TotalTokens: 435, CacheReadTokens: 256, ReasoningTokens: 17},
	},
	// Usage on the finish chunk, with float fields beside the counts.
	"groq-single-chunk-tool-call.sse": {
		calls:  []call{{0, "tk85n1k4m", "weather", "{}"}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 210, CompletionTokens: 15, TotalTokens: 225},
	},
	"llamacpp-gptoss-reasoning-then-tool-call-usage-timings.sse": {
		reasoning: "User wants weather in Florence, Italy. We can use the weather function.",
		calls:     []call{{0, "g2KOIWzn722hzEaZQmNVP4roUPEiYafL", "weather", `{"location":"Florence, Italy"}`}},
		finish:    "tool_calls",
		usage:     &stream.Usage{PromptTokens: 139, CompletionTokens: 41, TotalTokens: 180},
	},
	// The leaked tool XML is ordinary text to the parser: it is not one of
	// the control tags.
	"llamacpp-text-leaks-tool-xml-then-tool-call-timings.sse": {
		text:   "Hi there! Let me check the current weather for Washington DC for you.\n<tool_call>\n<function=get_current_weather",
		calls:  []call{{0, "emGvNsMhrq1M2MOwwmEiS9MHA7L1XNrE", "get_current_weather", `{"location":"Washington DC"}`}},
		finish: "tool_calls",
	},
	"mistral-glm-empty-name-second-chunk.sse": {
		calls:  []call{{0, "chatcmpl-tool-9f149c74c42f265b", "webSearchTool", `{"query": "current Berlin weather"}`}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 171, CompletionTokens: 14, TotalTokens: 185, CacheReadTokens: 128},
	},
	"mistral-tool-call-no-index-finish-same-chunk.sse": {
		calls:  []call{{stream.NoIndex, "gSIMJiOkT", "weather", `{"location": "San Francisco"}`}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 124, CompletionTokens: 22, TotalTokens: 146},
	},
	"ollama-parallel-whole-tool-calls-one-per-chunk.sse": {
		calls: []call{
			{0, "call_wteop8bt", "run_command", `{"command":"ls"}`},
			{1, "call_rk2xye1l", "run_command", `{"command":"ls -l"}`},
		},
		finish: "tool_calls",
	},
	"ollama-single-whole-tool-call-role-every-chunk.sse": {
		calls:  []call{{0, "call_hk81qg8b", "run_command", `{"command":"ls -la"}`}},
		finish: "tool_calls",
	},
	"openai-compatible-empty-tool-calls-array-reasoning.sse": {
		text:      "Hello",
		reasoning: "Think more...",
		finish:    "stop",
	},
	"openai-gpt4o-parallel-tool-calls-split-args.sse": {
		calls: []call{
			{0, "call_lQnnsesjFMWMQ5IeWPHzR4th", "GetWeatherArgs", `{"city": "Edinburgh", "country": "UK", "units": "c"}`},
			{1, "call_2xjOUgaCdiwAcl9ZBL9LyMUU", "get_stock_price", `{"ticker": "AAPL", "exchange": "NASDAQ"}`},
		},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 149, CompletionTokens: 60, TotalTokens: 209},
	},
	"openai-gpt4o-plain-text-many-small-deltas-usage-chunk.sse": {
		text: "I'm unable to provide real-time updates, including current weather information. " +
			"For the latest weather in San Francisco, I recommend checking a reliable weather website or app " +
			"such as the Weather Channel, BBC Weather, or a local San Francisco news station.",
		finish: "stop",
		usage:  &stream.Usage{PromptTokens: 14, CompletionTokens: 47, TotalTokens: 61},
	},
	"openai-gpt4o-text-then-tool-call-obfuscation.sse": {
		text:   "PRE_TOOL",
		calls:  []call{{0, "call_NZa7xqfefoaMI2YYHowVXVlU", "weather", "{}"}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 58, CompletionTokens: 12, TotalTokens: 70},
	},
	"openai-gpt4o-tool-call-in-role-chunk.sse": {
		calls:  []call{{0, "call_5uxEBMFySqqQGu02I5QHA8k6", "get_weather", `{"city":"New York City"}`}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 44, CompletionTokens: 16, TotalTokens: 60},
	},
	// Only encrypted reasoning_details: no reasoning text.
	"openrouter-gemini-parallel-whole-args-per-chunk-encrypted-reasoning.sse": {
		calls: []call{
			{0, "tool_add_kZJN6iFNozVOBiXBMA2Y", "add", `{"a":2,"b":3}`},
			{1, "tool_multiply_7Pq02EcannPbKks8kXlA", "multiply", `{"a":2,"b":3}`},
		},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 157, CompletionTokens: 32, TotalTokens: 189},
	},
	// Cached and reasoning tokens, and OpenRouter's cache_write_tokens (0).
	"openrouter-grok-processing-comments-mid-stream-reasoning-tool-call.sse": {
		reasoning: `The user asked: "What's the weather in Florence, Italy?" I have a tool called "weather" that gets weather information for a location. The parameter is "location", which is the city.` + "\n",
		calls:     []call{{0, "call_51659697", "weather", `{"location":"Florence, Italy"}`}},
		finish:    "tool_calls",
		usage:     &stream.Usage{PromptTokens: 366, CompletionTokens: 155, TotalTokens: 521, CacheReadTokens: 365, ReasoningTokens: 129},
	},
	"qwen-dashscope-empty-id-continuation-usage-chunk.sse": {
		calls:  []call{{0, "call_eee11723464a4b9eb8cee71d", "weather", `{"location": "San Francisco"}`}},
		finish: "tool_calls",
		usage:  &stream.Usage{PromptTokens: 295, CompletionTokens: 22, TotalTokens: 317},
	},
	// The "tool call" is only text inside the reasoning (with a literal
	// backslash-n): no structured call.
	"qwen3-coder-tool-call-as-text-in-reasoning-finish-stop.sse": {
		reasoning: `Need weather for planning.\n<tool_call><function=get_weather>{"city":"Lisbon"}</function></tool_call>`,
		finish:    "stop",
		usage:     &stream.Usage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30, ReasoningTokens: 12},
	},
	"vllm-qwen-tool-call-name-only-first-chunk.sse": {
		calls:  []call{{0, "chatcmpl-tool-ca99dda515524c6abe47d1ea22813507", "run_command", `{"command": "ls"}`}},
		finish: "tool_calls",
	},
}

func TestReplayRecordedStreams(t *testing.T) {
	files, err := filepath.Glob("../../testdata/streams/*.sse")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded streams found")
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			w, ok := replayWant[name]
			if !ok {
				t.Fatalf("no expectation for %s: add one to replayWant", name)
			}
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if w.err == nil {
				w.err = io.EOF
			}
			for _, mode := range []stream.Mode{stream.ModeDeltas, stream.ModeSentences} {
				got := consume(t, strings.NewReader(string(body)), mode)
				checkResult(t, got, w)
			}
			// The same body with CRLF line ends yields the same.
			crlf := strings.ReplaceAll(string(body), "\n", "\r\n")
			checkResult(t, consume(t, strings.NewReader(crlf), stream.ModeDeltas), w)
			// And when read one byte at a time.
			checkResult(t, consume(t, &oneByteReader{s: string(body)}, stream.ModeDeltas), w)
		})
	}
	for name := range replayWant {
		if _, err := os.Stat(filepath.Join("../../testdata/streams", name)); err != nil {
			t.Errorf("expectation for missing file %s", name)
		}
	}
}

func checkResult(t *testing.T, got result, w want) {
	t.Helper()
	if !errors.Is(got.err, w.err) {
		t.Errorf("Next ended with %v, want %v", got.err, w.err)
	}
	if got.text != w.text {
		t.Errorf("text = %q, want %q", got.text, w.text)
	}
	if got.raw != w.text { // no control tags in these recordings
		t.Errorf("raw = %q, want %q", got.raw, w.text)
	}
	if got.reasoning != w.reasoning {
		t.Errorf("reasoning = %q, want %q", got.reasoning, w.reasoning)
	}
	if got.finish != w.finish {
		t.Errorf("finish = %q, want %q", got.finish, w.finish)
	}
	switch {
	case (got.usage == nil) != (w.usage == nil):
		t.Errorf("usage = %v, want %v", got.usage, w.usage)
	case got.usage != nil && *got.usage != *w.usage:
		t.Errorf("usage = %+v, want %+v", *got.usage, *w.usage)
	}
	if len(got.calls) != len(w.calls) {
		t.Fatalf("calls = %+v, want %d calls %+v", got.calls, len(w.calls), w.calls)
	}
	for i, c := range got.calls {
		wc := w.calls[i]
		if c.Index != wc.index || c.Name != wc.name || c.Arguments != wc.args {
			t.Errorf("call %d = {%d %q %q}, want {%d %q %q}", i, c.Index, c.Name, c.Arguments, wc.index, wc.name, wc.args)
		}
		if wc.id == "" && !strings.HasPrefix(c.ID, "call_") || wc.id != "" && c.ID != wc.id {
			t.Errorf("call %d id = %q, want %q", i, c.ID, wc.id)
		}
	}
	if len(got.started) != len(w.calls) {
		t.Errorf("start reported for %q, want once per call", got.started)
	}
}

// oneByteReader returns its string one byte per Read.
type oneByteReader struct{ s string }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}
