package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/stream"
)

// frame returns an SSE data frame for a chunk with one choice.
func frame(delta map[string]any, finish any) string {
	c := map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
	return data(c)
}

func data(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return "data: " + string(b) + "\n\n"
}

func tc(index any, id, name, args string) map[string]any {
	m := map[string]any{"function": map[string]any{"name": name, "arguments": args}}
	if index != nil {
		m["index"] = index
	}
	if id != "" {
		m["id"] = id
		m["type"] = "function"
	}
	return map[string]any{"tool_calls": []any{m}}
}

const done = "data: [DONE]\n\n"

func TestTranscripts(t *testing.T) {
	usageOnly := data(map[string]any{"id": "x", "choices": []any{}, "usage": map[string]any{"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})
	tests := []struct {
		name string
		body string
		want want
	}{
		{
			name: "openai parallel calls, args in many deltas, usage-only final chunk",
			body: frame(map[string]any{"role": "assistant", "content": nil}, nil) +
				frame(tc(0, "call_a", "get_weather", ""), nil) +
				frame(tc(0, "", "", `{"ci`), nil) + frame(tc(0, "", "", `ty": "Pa`), nil) + frame(tc(0, "", "", `ris"}`), nil) +
				frame(tc(1, "call_b", "get_time", `{"tz"`), nil) + frame(tc(1, "", "", `: "CET"}`), nil) +
				frame(map[string]any{}, "tool_calls") + usageOnly + done,
			want: want{
				calls:  []call{{0, "call_a", "get_weather", `{"city": "Paris"}`}, {1, "call_b", "get_time", `{"tz": "CET"}`}},
				finish: "tool_calls",
				usage:  &stream.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13},
			},
		},
		{
			name: "ollama whole call in one delta, no done",
			body: frame(merge(map[string]any{"role": "assistant", "content": ""}, tc(0, "call_o", "run", `{"cmd":"ls"}`)), nil) +
				frame(map[string]any{"role": "assistant", "content": ""}, "tool_calls"),
			want: want{calls: []call{{0, "call_o", "run", `{"cmd":"ls"}`}}, finish: "tool_calls"},
		},
		{
			name: "mistral no index, finish on the same chunk",
			body: frame(map[string]any{"role": "assistant", "content": ""}, nil) +
				frame(merge(map[string]any{"content": nil}, tc(nil, "m1", "weather", `{"q": 1}`)), "tool_calls") + done,
			want: want{calls: []call{{stream.NoIndex, "m1", "weather", `{"q": 1}`}}, finish: "tool_calls"},
		},
		{
			name: "mistral no index, two calls told apart by id",
			body: frame(tc(nil, "m1", "a", `{}`), nil) + frame(tc(nil, "m2", "b", `{"x"`), nil) + frame(tc(nil, "", "", `:1}`), "tool_calls") + done,
			want: want{calls: []call{{stream.NoIndex, "m1", "a", `{}`}, {stream.NoIndex, "m2", "b", `{"x":1}`}}, finish: "tool_calls"},
		},
		{
			name: "azure first chunk with empty choices",
			body: data(map[string]any{"choices": []any{}, "id": "", "model": "", "object": "", "prompt_filter_results": []any{map[string]any{"prompt_index": 0}}}) +
				frame(map[string]any{"content": "Hi"}, nil) + frame(map[string]any{}, "stop") + done,
			want: want{text: "Hi", finish: "stop"},
		},
		{
			name: "keep-alive comments and other fields",
			body: ": keep-alive\n\nretry: 3000\n\nevent: message\nid: 7\n" + strings.TrimPrefix(frame(map[string]any{"content": "a"}, nil), "") +
				": OPENROUTER PROCESSING\n\n" + frame(map[string]any{"content": "b"}, "stop") + ":\n\n" + done,
			want: want{text: "ab", finish: "stop"},
		},
		{
			name: "no done and no finish is truncated",
			body: frame(map[string]any{"content": "Hel"}, nil) + frame(map[string]any{"content": "lo"}, nil),
			want: want{text: "Hello", err: wire.ErrTruncated},
		},
		{
			name: "body cut inside a frame is truncated",
			body: frame(map[string]any{"content": "Hel"}, nil) + `data: {"choices":[{"delta":{"cont`,
			want: want{text: "Hel", err: wire.ErrTruncated},
		},
		{
			name: "control tags through the whole pipeline",
			body: frame(map[string]any{"content": "<voice>Sure. <no_"}, nil) + frame(map[string]any{"content": "tool>"}, "stop") + done,
			want: want{text: "Sure. ", finish: "stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want.err == nil {
				tt.want.err = io.EOF
			}
			got := consume(t, strings.NewReader(tt.body), stream.ModeDeltas)
			if tt.name == "control tags through the whole pipeline" {
				if got.raw != "<voice>Sure. <no_tool>" {
					t.Errorf("raw = %q", got.raw)
				}
				got.raw = got.text
				if len(got.pieces) == 0 || !got.pieces[0].Voice {
					t.Errorf("pieces = %+v, want voice pieces", got.pieces)
				}
			}
			checkResult(t, got, tt.want)
		})
	}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func TestErrorFrameMidStream(t *testing.T) {
	tests := []struct {
		name               string
		frame              string
		msg, typ, code     string
		wantErrTextContain string
	}{
		{"object", `data: {"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded","param":null}}`, "Rate limit reached", "requests", "rate_limit_exceeded", "Rate limit reached"},
		{"numeric code", `data: {"error":{"message":"overloaded","code":529}}`, "overloaded", "", "529", "code 529"},
		{"string", `data: {"error":"upstream closed"}`, "upstream closed", "", "", "upstream closed"},
		{"event line before", "event: error\ndata: {\"error\":{\"message\":\"bad\"}}", "bad", "", "", "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := frame(map[string]any{"content": "partial"}, nil) + tt.frame + "\n\n" + frame(map[string]any{"content": "never"}, nil)
			r := wire.NewReader(strings.NewReader(body))
			d, err := r.Next()
			if err != nil || d.Content != "partial" {
				t.Fatalf("first Next = %+v, %v; want the content before the error", d, err)
			}
			_, err = r.Next()
			var se *wire.StreamError
			if !errors.As(err, &se) {
				t.Fatalf("Next error = %v (%T), want *StreamError", err, err)
			}
			if se.Message != tt.msg || se.Type != tt.typ || se.Code != tt.code {
				t.Errorf("StreamError = {%q %q %q}, want {%q %q %q}", se.Message, se.Type, se.Code, tt.msg, tt.typ, tt.code)
			}
			if !strings.Contains(err.Error(), tt.wantErrTextContain) {
				t.Errorf("Error() = %q, want it to contain %q", err.Error(), tt.wantErrTextContain)
			}
			if len(se.Raw) == 0 {
				t.Error("StreamError.Raw is empty")
			}
			if _, again := r.Next(); again != err {
				t.Errorf("Next after the error = %v, want the same error again", again)
			}
		})
	}
}

func TestBadFramesAndReadErrors(t *testing.T) {
	t.Run("invalid json", func(t *testing.T) {
		r := wire.NewReader(strings.NewReader("data: {\"choices\": [nope]}\n\n"))
		_, err := r.Next()
		if err == nil || !strings.Contains(err.Error(), "wire: bad frame") || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("err = %v, want a bad-frame error with an excerpt", err)
		}
		if errors.Is(err, wire.ErrTruncated) {
			t.Errorf("err = %v: a complete bad frame is not truncation", err)
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		r := wire.NewReader(strings.NewReader(`data: {"choices":[{"delta":{"content":5}}]}` + "\n\n"))
		if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "wire: bad frame") {
			t.Fatalf("err = %v, want a bad-frame error", err)
		}
	})
	t.Run("read error is wrapped", func(t *testing.T) {
		boom := errors.New("connection reset")
		body := io.MultiReader(strings.NewReader(frame(map[string]any{"content": "a"}, nil)), iotest.ErrReader(boom))
		r := wire.NewReader(body)
		if d, err := r.Next(); err != nil || d.Content != "a" {
			t.Fatalf("first Next = %v, %v", d, err)
		}
		_, err := r.Next()
		if !errors.Is(err, boom) || !errors.Is(err, wire.ErrTruncated) || !strings.HasSuffix(err.Error(), "(reading the body: connection reset)") {
			t.Fatalf("err = %v, want truncation that wraps %v and says so", err, boom)
		}
	})
	t.Run("unexpected EOF from the transport", func(t *testing.T) {
		body := io.MultiReader(strings.NewReader(frame(map[string]any{"content": "a"}, nil)), iotest.ErrReader(io.ErrUnexpectedEOF))
		r := wire.NewReader(body)
		_, _ = r.Next()
		if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF wrapped", err)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		if _, err := wire.NewReader(strings.NewReader("")).Next(); !errors.Is(err, wire.ErrTruncated) {
			t.Fatalf("err = %v, want ErrTruncated", err)
		}
	})
	t.Run("eof is sticky", func(t *testing.T) {
		r := wire.NewReader(strings.NewReader(done + frame(map[string]any{"content": "after"}, nil)))
		for i := range 3 {
			if d, err := r.Next(); err != io.EOF {
				t.Fatalf("call %d = %v, %v; want io.EOF", i, d, err)
			}
		}
	})
}

func TestSSEFraming(t *testing.T) {
	content := `{"choices":[{"delta":{"content":"x"}}]}`
	tests := []struct {
		name, body, want string
	}{
		{"lf", "data: " + content + "\n\n", "x"},
		{"crlf", "data: " + content + "\r\n\r\n", "x"},
		{"lone cr", "data: " + content + "\r\rdata: " + content + "\r\r", "xx"},
		{"no space after colon", "data:" + content + "\n\n", "x"},
		{"multi-line data", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"y\"}}]}\n\n", "y"},
		{"bom", "\xEF\xBB\xBFdata: " + content + "\n\n", "x"},
		{"last event without blank line", "data: " + content + "\n", "x"},
		{"last line without line end", "data: " + content, "x"},
		{"field without colon ignored", "data\n\ndata: " + content + "\n\n", "x"},
		{"long line", "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("z", 200<<10) + "\"}}]}\n\n", strings.Repeat("z", 200<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wire.NewReader(strings.NewReader(tt.body))
			var got strings.Builder
			var err error
			for {
				var d *stream.Delta
				if d, err = r.Next(); err != nil {
					break
				}
				got.WriteString(d.Content)
			}
			if got.String() != tt.want {
				t.Errorf("content = %.40q (%d bytes), want %.40q (%d bytes)", got.String(), got.Len(), tt.want, len(tt.want))
			}
			if !errors.Is(err, wire.ErrTruncated) {
				t.Errorf("end = %v, want ErrTruncated (no finish, no [DONE])", err)
			}
		})
	}
}

// FuzzReader feeds arbitrary bodies: the Reader must never panic, must end
// with an error, and must not hand out an empty delta.
func FuzzReader(f *testing.F) {
	seeds := []string{
		"", "\n\n", ": keep-alive\n\nretry: 3000\n\n", "data: [DONE]\n\n", "data:[DONE]",
		"data: {}\n\n", "data: {\n\n", "event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\r\rdata",
		"\xEF\xBB\xBFdata: {\"choices\":[]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\"}}]}}]}\n\n",
		// Bodies that are not an event stream.
		`{"error":{"message":"no such model","param":"model","code":404}}`, `{"error":"quota"}`, "\n [1]",
		`{"object":"chat.completion","choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
		"<html>\x00\xff\n\t</html>", "Bad Gateway", "\xEF\xBB\xBF\r\n{", "retry", "id:",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := wire.NewReader(strings.NewReader(string(body)))
		for range len(body) + 2 {
			d, err := r.Next()
			if err != nil {
				if d != nil {
					t.Fatalf("Next returned a delta with error %v", err)
				}
				if ne := (*wire.NotStreamError)(nil); errors.As(err, &ne) {
					if msg := err.Error(); !utf8.ValidString(msg) || strings.ContainsAny(msg, "\n\r") {
						t.Fatalf("NotStreamError text %q is not one line of valid text", msg)
					}
				}
				return
			}
			if d.Content == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 && d.FinishReason == "" && d.Usage == nil {
				t.Fatalf("Next returned an empty delta")
			}
		}
		t.Fatalf("Next did not end after %d calls", len(body)+2)
	})
}

// FuzzReaderRoundTrip encodes text split into deltas as an SSE body with
// varied framing, and checks the Reader gives the same text back.
func FuzzReaderRoundTrip(f *testing.F) {
	f.Add("Hello, world! <no_tool>", []byte{1, 3, 5}, uint8(0))
	f.Add("你好\n\"quoted\" \\ \u2028 \x00", []byte{2, 2}, uint8(7))
	f.Add("", []byte{}, uint8(3))
	f.Add("whole \"completion\"\n", []byte{4}, uint8(33))
	f.Fuzz(func(t *testing.T, text string, cuts []byte, style uint8) {
		parts := split(text, cuts)
		var b strings.Builder
		nl := [...]string{"\n", "\r\n", "\r"}[style%3]
		for i, p := range parts {
			if style&4 != 0 {
				b.WriteString(": ping" + nl + nl)
			}
			if style&8 != 0 {
				b.WriteString("event: chunk" + nl + "id: " + fmt.Sprint(i) + nl)
			}
			j, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": p}}}})
			if style&16 != 0 {
				// Split the JSON over two data lines at a space-free point.
				j = []byte(strings.Replace(string(j), `"delta":`, `"delta":`+nl+"data: ", 1))
			}
			b.WriteString("data: " + string(j) + nl + nl)
		}
		b.WriteString("data: [DONE]" + nl + nl)
		if style&32 != 0 {
			// A server that ignored "stream": one chat.completion object.
			j, _ := json.Marshal(map[string]any{"object": "chat.completion", "choices": []any{map[string]any{
				"index": 0, "message": map[string]any{"role": "assistant", "content": sent(parts)}, "finish_reason": "stop"}}})
			b.Reset()
			b.WriteString(nl + string(j) + nl)
		}
		r := wire.NewReader(strings.NewReader(b.String()))
		var got strings.Builder
		for {
			d, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v (body %q)", err, b.String())
			}
			got.WriteString(d.Content)
		}
		if want := sent(parts); got.String() != want {
			t.Fatalf("round trip = %q, want %q", got.String(), want)
		}
	})
}

// sent is the text the parts carry once encoded: json.Marshal replaces each
// invalid UTF-8 byte of a part with U+FFFD.
func sent(parts []string) string {
	var want strings.Builder
	for _, p := range parts {
		var s string
		j, _ := json.Marshal(p)
		_ = json.Unmarshal(j, &s)
		want.WriteString(s)
	}
	return want.String()
}

// split cuts s at the positions cuts give (each byte a step forward).
func split(s string, cuts []byte) []string {
	var out []string
	for _, c := range cuts {
		n := int(c)%8 + 1
		if n > len(s) {
			break
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// readAll reads r to its end and returns the content and the final error.
func readAll(r *wire.Reader) (string, error) {
	var b strings.Builder
	for {
		d, err := r.Next()
		if err != nil {
			return b.String(), err
		}
		b.WriteString(d.Content)
	}
}

// A body read one byte at a time, so that every line, line end, BOM and
// field name is split between reads at every byte, decodes as when read
// whole.
func TestFramingSplitAtEveryByte(t *testing.T) {
	c := func(s string) string { return `{"choices":[{"delta":{"content":"` + s + `"}}]}` }
	bodies := map[string]string{
		"lf":         "data: " + c("a") + "\n\ndata: " + c("b") + "\n\ndata: [DONE]\n\n",
		"crlf":       "data: " + c("a") + "\r\n\r\ndata:" + c("b") + "\r\n\r\ndata: [DONE]\r\n\r\n",
		"cr":         "data: " + c("a") + "\r\rdata:" + c("b") + "\r\rdata: [DONE]\r\r",
		"mixed":      "\xEF\xBB\xBF: hi\r\nevent: x\rdata: {\"choices\":[{\"delta\":\ndata: {\"content\":\"a\"}}]}\r\n\ndata:" + c("b") + "\r\n\r\ndata: [DONE]",
		"bom and cr": "\xEF\xBB\xBFdata: " + c("a") + "\r\rdata: " + c("b") + "\r\r\ndata: [DONE]\n\n",
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			whole, werr := readAll(wire.NewReader(strings.NewReader(body)))
			bytewise, berr := readAll(wire.NewReader(iotest.OneByteReader(strings.NewReader(body))))
			if whole != "ab" || werr != io.EOF {
				t.Errorf("whole body: %q, %v; want \"ab\", EOF", whole, werr)
			}
			if bytewise != whole || berr != werr {
				t.Errorf("byte by byte: %q, %v; whole: %q, %v", bytewise, berr, whole, werr)
			}
		})
	}
}

// Lines ended by a lone CR are events as soon as they arrive: the Reader
// does not wait for an LF (or the end of the body) before it hands them
// out.
func TestLoneCRFramingStreams(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go pw.Write([]byte("data: " + `{"choices":[{"delta":{"content":"first"}}]}` + "\r\r"))
	got := make(chan string, 1)
	go func() {
		d, err := wire.NewReader(pr).Next()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- d.Content
	}()
	select {
	case s := <-got:
		if s != "first" {
			t.Fatalf("Next = %q, want first", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Next still waits for more input after an event ended by CR CR")
	}
	pw.Close()
}

// The error forms servers send besides data: {"error": ...}: an SSE field
// named error (llama.cpp's server_sent_event(sink, "error", ...), which is
// followed by data: [DONE]) and an event named error whose data is the
// error object itself.
func TestErrorEventForms(t *testing.T) {
	before := frame(map[string]any{"content": "partial"}, nil)
	tests := []struct {
		name, body, msg, typ, code string
	}{
		{"llama.cpp error field", before + `error: {"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}` + "\n\n" + done,
			"the request exceeds the available context size", "exceed_context_size_error", "400"},
		{"event error with a bare object", before + "event: error\ndata: {\"message\":\"Internal server error\",\"code\":500}\n\n" + done,
			"Internal server error", "", "500"},
		{"event error with an error object", before + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			"Overloaded", "overloaded_error", ""},
		{"event error with text", before + "event: error\ndata: upstream timed out\n\n" + done,
			"upstream timed out", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wire.NewReader(strings.NewReader(tt.body))
			text, err := readAll(r)
			if text != "partial" {
				t.Errorf("content = %q, want the content before the error", text)
			}
			var se *wire.StreamError
			if !errors.As(err, &se) {
				t.Fatalf("end = %v (%T), want *StreamError", err, err)
			}
			if se.Message != tt.msg || se.Type != tt.typ || se.Code != tt.code {
				t.Errorf("StreamError = {%q %q %q}, want {%q %q %q}", se.Message, se.Type, se.Code, tt.msg, tt.typ, tt.code)
			}
		})
	}
	t.Run("other event names are chunks", func(t *testing.T) {
		body := "event: message\n" + frame(map[string]any{"content": "a"}, "stop") + done
		if text, err := readAll(wire.NewReader(strings.NewReader(body))); text != "a" || err != io.EOF {
			t.Errorf("got %q, %v; want a, EOF", text, err)
		}
	})
}

func TestTruncationRules(t *testing.T) {
	tests := []struct {
		name, body string
		want       error
	}{
		{"done", frame(map[string]any{"content": "a"}, nil) + done, io.EOF},
		{"finish without done", frame(map[string]any{"content": "a"}, "stop"), io.EOF},
		{"finish then usage chunk without done", frame(map[string]any{"content": "a"}, "length") + data(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 1}}), io.EOF},
		{"neither", frame(map[string]any{"content": "a"}, nil), wire.ErrTruncated},
		{"only comments", ": keep-alive\n\n", wire.ErrTruncated},
		{"done cut", frame(map[string]any{"content": "a"}, nil) + "data: [DO", wire.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readAll(wire.NewReader(strings.NewReader(tt.body))); !errors.Is(err, tt.want) {
				t.Errorf("end = %v, want %v", err, tt.want)
			}
		})
	}
}
