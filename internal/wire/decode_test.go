package wire

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/planround/planround/stream"
)

// recordedFrames returns the data of every data: line of the recorded
// streams (all of them are single-line frames).
func recordedFrames(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob("../../testdata/streams/*.sse")
	if err != nil || len(files) == 0 {
		tb.Fatalf("recorded streams: %v (%d files)", err, len(files))
	}
	var frames [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && string(d) != "[DONE]" {
				frames = append(frames, bytes.Clone(d))
			}
		}
	}
	return frames
}

// TestFastPathCoversRecordedFrames checks that every frame real providers
// sent is handled by the fast decoder (no fallback), and that it agrees
// with the encoding/json reference.
func TestFastPathCoversRecordedFrames(t *testing.T) {
	var x decoder
	for i, f := range recordedFrames(t) {
		var fast, slow stream.Delta
		if !x.fast(f, &fast) {
			t.Errorf("frame %d fell back to encoding/json: %s", i, excerpt(f))
			continue
		}
		if err := slowDecode(f, &slow); err != nil {
			t.Fatalf("frame %d: reference failed: %v", i, err)
		}
		if !sameDelta(fast, slow) {
			t.Errorf("frame %d: fast = %+v, reference = %+v", i, fast, slow)
		}
	}
}

func TestDecodeShapes(t *testing.T) {
	tests := []struct {
		name     string
		frame    string
		want     stream.Delta
		wantFast bool // the fast path handles it
	}{
		{
			name:     "content",
			frame:    `{"choices":[{"delta":{"content":"tok"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-1"}`,
			want:     stream.Delta{Content: "tok"},
			wantFast: true,
		},
		{
			name:     "escapes and surrogate pair",
			frame:    `{"choices":[{"delta":{"content":"a\"b\\c\/\n\t\u00e9\ud83d\ude00"}}]}`,
			want:     stream.Delta{Content: "a\"b\\c/\n\té😀"},
			wantFast: true,
		},
		{
			name:     "lone surrogate falls back",
			frame:    `{"choices":[{"delta":{"content":"\ud83dx"}}]}`,
			want:     stream.Delta{Content: "\uFFFDx"},
			wantFast: false,
		},
		{
			name:     "other choice ignored",
			frame:    `{"choices":[{"index":1,"delta":{"content":"no","tool_calls":[{"index":0,"id":"x"}]}},{"delta":{"content":"yes"},"index":0}]}`,
			want:     stream.Delta{Content: "yes"},
			wantFast: true,
		},
		{
			name:     "reasoning_content wins over reasoning",
			frame:    `{"choices":[{"delta":{"reasoning":"b","reasoning_content":"a"}}]}`,
			want:     stream.Delta{Reasoning: "a"},
			wantFast: true,
		},
		{
			name:     "reasoning object ignored",
			frame:    `{"choices":[{"delta":{"reasoning":{"text":"x"}}}]}`,
			want:     stream.Delta{},
			wantFast: true,
		},
		{
			name:     "arguments as an object",
			frame:    `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":{"a": 1}}}]}}]}`,
			want:     stream.Delta{ToolCalls: []stream.ToolCallDelta{{Index: 0, ID: "c", Name: "f", Arguments: `{"a": 1}`}}},
			wantFast: true,
		},
		{
			name:     "no index",
			frame:    `{"choices":[{"delta":{"tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}}]}`,
			want:     stream.Delta{ToolCalls: []stream.ToolCallDelta{{Index: stream.NoIndex, ID: "c", Arguments: "{}"}}},
			wantFast: true,
		},
		{
			name:     "empty fragment dropped",
			frame:    `{"choices":[{"delta":{"tool_calls":[{"type":"function"}]}}]}`,
			want:     stream.Delta{},
			wantFast: true,
		},
		{
			name:     "float usage falls back and is truncated",
			frame:    `{"choices":[],"usage":{"prompt_tokens":12.0,"completion_tokens":3,"total_tokens":1e1}}`,
			want:     stream.Delta{Usage: &stream.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 10}},
			wantFast: false,
		},
		{
			name:     "usage details: cached, cache-write and reasoning tokens",
			frame:    `{"choices":[],"usage":{"prompt_tokens":374,"completion_tokens":61,"total_tokens":435,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":256,"cache_write_tokens":64},"completion_tokens_details":{"reasoning_tokens":17,"audio_tokens":0},"prompt_cache_hit_tokens":256}}`,
			want:     stream.Delta{Usage: &stream.Usage{PromptTokens: 374, CompletionTokens: 61, TotalTokens: 435, CacheReadTokens: 256, CacheWriteTokens: 64, ReasoningTokens: 17}},
			wantFast: true,
		},
		{
			name:     "null usage details",
			frame:    `{"usage":{"prompt_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}}`,
			want:     stream.Delta{Usage: &stream.Usage{PromptTokens: 3}},
			wantFast: true,
		},
		{
			name:     "usage details that are not objects fall back and count as none",
			frame:    `{"usage":{"prompt_tokens":3,"prompt_tokens_details":5,"completion_tokens_details":[{"reasoning_tokens":2}]}}`,
			want:     stream.Delta{Usage: &stream.Usage{PromptTokens: 3}},
			wantFast: false,
		},
		{
			name:     "float usage detail falls back and is truncated",
			frame:    `{"usage":{"completion_tokens_details":{"reasoning_tokens":2.0}}}`,
			want:     stream.Delta{Usage: &stream.Usage{ReasoningTokens: 2}},
			wantFast: false,
		},
		{
			name:     "case-folded key falls back",
			frame:    `{"Choices":[{"delta":{"content":"x"}}]}`,
			want:     stream.Delta{Content: "x"},
			wantFast: false,
		},
		{
			name:     "duplicate key falls back",
			frame:    `{"choices":[{"delta":{"content":"x","content":"y"}}]}`,
			want:     stream.Delta{Content: "y"},
			wantFast: false,
		},
		{
			name:     "whitespace everywhere",
			frame:    " {\n\t\"choices\" : [ { \"delta\" : { \"content\" : null } , \"finish_reason\" : \"length\" } ] } \r\n",
			want:     stream.Delta{FinishReason: "length"},
			wantFast: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x decoder
			var fast, slow stream.Delta
			gotFast := x.fast([]byte(tt.frame), &fast)
			if gotFast != tt.wantFast {
				t.Errorf("fast path handled it: %v, want %v", gotFast, tt.wantFast)
			}
			if gotFast && !sameDelta(fast, tt.want) {
				t.Errorf("fast = %+v, want %+v", fast, tt.want)
			}
			if err := slowDecode([]byte(tt.frame), &slow); err != nil {
				t.Fatalf("reference: %v", err)
			}
			if !sameDelta(slow, tt.want) {
				t.Errorf("reference = %+v, want %+v", slow, tt.want)
			}
		})
	}
}

// sameDelta compares deltas, treating nil and empty ToolCalls alike.
func sameDelta(a, b stream.Delta) bool {
	if len(a.ToolCalls) == 0 && len(b.ToolCalls) == 0 {
		a.ToolCalls, b.ToolCalls = nil, nil
	}
	if (a.Usage == nil) != (b.Usage == nil) || a.Usage != nil && *a.Usage != *b.Usage {
		return false
	}
	a.Usage, b.Usage = nil, nil
	return reflect.DeepEqual(a, b)
}

// FuzzDecodeFrame holds the fast decoder to the encoding/json reference:
// whatever frame it accepts, the reference accepts too and decodes the same.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range recordedFrames(f) {
		f.Add(fr)
	}
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a\u00e9\ud83d\ude00"}}]}`,
		`{"choices":[{"index":1,"delta":{"content":"x"}},{"index":0,"delta":{"content":"y"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":[1,2.5e3,true,null]}}}]}}]}`,
		`{"error":{"message":"boom","code":429}}`,
		`{"usage":{"prompt_tokens":-0,"completion_tokens":100000000000000,"total_tokens":9}}`,
		`{"choices":null,"usage":null}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":7,"cache_write_tokens":2},"completion_tokens_details":{"reasoning_tokens":5}}}`,
		`{"usage":{"prompt_tokens_details":null,"completion_tokens_details":{}}}`,
		`{}`, `null`, `[]`, `{"choices":[{"delta":{"content":"\u0000"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var x decoder
		var fast, slow stream.Delta
		if !x.fast(frame, &fast) {
			_ = slowDecode(frame, &slow) // must not panic
			return
		}
		if err := slowDecode(frame, &slow); err != nil {
			t.Fatalf("fast path accepted a frame the reference rejects (%v): %q", err, frame)
		}
		if !sameDelta(fast, slow) {
			t.Fatalf("fast = %+v, reference = %+v for %q", fast, slow, frame)
		}
	})
}

// TestFastAgreesOnTrickyJSON holds the fast decoder to the reference on
// valid but unusual frames: whatever it accepts it must decode the same.
func TestFastAgreesOnTrickyJSON(t *testing.T) {
	long := strings.Repeat("é", 70_000)
	frames := []string{
		`{"choices":[{"delta":{"content":"\u0000a\u0000"}}]}`,
		`{"choices":[{"delta":{"content":"\ud83d\ude00\uD83D\uDE00"}}]}`,
		`{"choices":[{"delta":{"content":"\ud83d\u0041"}}]}`,
		`{"choices":[{"delta":{"content":"\udc00"}}]}`,
		"{\"choices\":[{\"delta\":{\"content\":\"bad \xff\xfe utf8\"}}]}",
		"{\"choices\":[{\"delta\":{\"content\":\"cut \xe5\xa5\"}}]}",
		`{"choices":[{"index":1e0,"delta":{"content":"x"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1e3,"id":"c"}]}}]}`,
		`{"choices":[{"index":0.0,"delta":{"content":"x"}}]}`,
		`{"choices":[{"index":-0,"delta":{"content":"x"}}]}`,
		`{"choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}`,
		`{"choices":[],"choices":[{"delta":{"content":"b"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}`,
		`{"choices":null,"usage":null,"error":null}`,
		`{"choices":[null]}`,
		`{"choices":[{"index":null,"delta":null,"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":null,"reasoning_content":null,"reasoning":null,"tool_calls":null}}]}`,
		`{"choices":[{"delta":{"tool_calls":[null]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":null,"id":null,"function":null}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":null,"arguments":null}}]}}]}`,
		`{"usage":{"prompt_tokens":null,"completion_tokens":null,"total_tokens":null}}`,
		`{"x":{"a":"]}{\"","b":["}",{"c":"\\\""}]},"choices":[{"delta":{"content":"ok","y":[{"z":"}]"}]}}]}`,
		`{"choices":[{"delta":{"content":"` + long + `"}}]}`,
		`{"choices":[{"delta":{"content":5}}]}`,
		`{"choices":[{"delta":{"content":true}}]}`,
		`{"choices":[{"finish_reason":5}]}`,
		`{"choices":[{"finish_reason":"st\u006fp"}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":[1,{"a":"]"}]}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":  {"a" : 1}  }}]}}]}`,
		`{"choices":[{"delta":{"CONTENT":"x"}}]}`,
		`{"choices":[{"delta":{"content":"x","Content":"y"}}]}`,
		`{"choices":[{"delta":{"\u0063ontent":"x"}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"","reasoning":"r"}}]}`,
		`{"choices":[{"delta":{"reasoning_content":5,"reasoning":"r"}}]}`,
		`{"usage":{"prompt_tokens":1e2,"completion_tokens":"3","total_tokens":-1}}`,
		`{"usage":{"prompt_tokens":999999999999999,"completion_tokens":9999999999999999}}`,
		`{"usage":5}`, `{"usage":[]}`, `{"usage":"x"}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}`,
		`{"usage":{"prompt_tokens_details":{"Cached_Tokens":1}}}`,
		`{"usage":{"Prompt_Tokens_Details":{"cached_tokens":1}}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":"1"},"completion_tokens_details":{"reasoning_tokens":true}}}`,
		`{"usage":{"prompt_tokens_details":"x","completion_tokens_details":1}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":3},"prompt_tokens_details":null}}`,
		`{"usage":{"completion_tokens_details":{"reasoning_tokens":-4,"x":{"reasoning_tokens":9}}}}`,
		"\ufeff{\"choices\":[]}",
		`{"choices":[{"delta":{"content":"x"}}]} {}`,
		`{"choices":[{"delta":{"content":"x"}}]}` + "\n\t\r ",
	}
	var x decoder
	for _, f := range frames {
		var fast, slow stream.Delta
		ok := x.fast([]byte(f), &fast)
		err := slowDecode([]byte(f), &slow)
		if !ok {
			continue
		}
		if err != nil {
			t.Errorf("fast accepted what the reference rejects (%v): %.120q", err, f)
			continue
		}
		if !sameDelta(fast, slow) {
			t.Errorf("fast = %+v\nreference = %+v\nfor %.120q", fast, slow, f)
		}
	}
}
