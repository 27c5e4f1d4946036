package wire_test

import (
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/planround/planround/internal/wire"
	"github.com/planround/planround/stream"
)

// A read error (a cut or reset connection) before the response finished is
// truncation and keeps its cause; after a finish_reason the response was
// complete and the error does not matter.
func TestReadErrorsAndFinish(t *testing.T) {
	a := frame(map[string]any{"content": "a"}, nil)
	stop := frame(map[string]any{"content": "b"}, "stop")
	tests := []struct {
		name  string
		body  io.Reader
		want  error // errors.Is
		cause error // errors.Is, when not nil
		text  string
	}{
		{"unexpected EOF mid-stream", io.MultiReader(strings.NewReader(a), iotest.ErrReader(io.ErrUnexpectedEOF)), wire.ErrTruncated, io.ErrUnexpectedEOF, "a"},
		{"reset mid-stream", io.MultiReader(strings.NewReader(a), iotest.ErrReader(syscall.ECONNRESET)), wire.ErrTruncated, syscall.ECONNRESET, "a"},
		{"unexpected EOF inside a frame", io.MultiReader(strings.NewReader(a+`data: {"choi`), iotest.ErrReader(io.ErrUnexpectedEOF)), wire.ErrTruncated, io.ErrUnexpectedEOF, "a"},
		{"unexpected EOF after finish", io.MultiReader(strings.NewReader(a+stop), iotest.ErrReader(io.ErrUnexpectedEOF)), io.EOF, nil, "ab"},
		{"reset after finish", io.MultiReader(strings.NewReader(a+stop), iotest.ErrReader(syscall.ECONNRESET)), io.EOF, nil, "ab"},
		{"cut inside the usage frame after finish", io.MultiReader(strings.NewReader(a+stop+`data: {"choices":[],"usa`), iotest.ErrReader(io.ErrUnexpectedEOF)), io.EOF, nil, "ab"},
		{"clean end inside the frame after finish", strings.NewReader(a + stop + `data: {"choices":[],"usa`), io.EOF, nil, "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, err := readAll(wire.NewReader(tt.body))
			if text != tt.text {
				t.Errorf("content = %q, want %q", text, tt.text)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("end = %v, want %v", err, tt.want)
			}
			if tt.cause != nil {
				if !errors.Is(err, tt.cause) || !strings.Contains(err.Error(), tt.cause.Error()) {
					t.Errorf("end = %q, want it to carry %q", err, tt.cause)
				}
			}
		})
	}
}

// An error frame that is the last line of the body, without a line end, is
// the provider's error, not a cut frame.
func TestErrorFrameWithoutLineEnd(t *testing.T) {
	for _, before := range []string{frame(map[string]any{"content": "a"}, nil), frame(map[string]any{"content": "a"}, "stop")} {
		_, err := readAll(wire.NewReader(strings.NewReader(before + `data: {"error":{"message":"boom"}}`)))
		var se *wire.StreamError
		if !errors.As(err, &se) || se.Message != "boom" {
			t.Errorf("end = %v (%T), want the StreamError", err, err)
		}
	}
}

// Bodies of a 200 response that are not an event stream.
func TestNotAnEventStream(t *testing.T) {
	t.Run("error object", func(t *testing.T) {
		for _, body := range []string{
			`{"error":{"message":"model gpt-x does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			"\n  " + `{"error": {"message": "model gpt-x does not exist", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}` + "\n",
		} {
			_, err := readAll(wire.NewReader(strings.NewReader(body)))
			var se *wire.StreamError
			if !errors.As(err, &se) {
				t.Fatalf("end = %v (%T), want *StreamError", err, err)
			}
			if se.Message != "model gpt-x does not exist" || se.Type != "invalid_request_error" || se.Code != "model_not_found" || se.Param != "model" {
				t.Errorf("StreamError = %+v", se)
			}
			if errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%v is not truncation", err)
			}
		}
	})
	t.Run("error string", func(t *testing.T) {
		_, err := readAll(wire.NewReader(strings.NewReader(`{"error":"quota exceeded"}`)))
		var se *wire.StreamError
		if !errors.As(err, &se) || se.Message != "quota exceeded" {
			t.Fatalf("end = %v, want a StreamError saying quota exceeded", err)
		}
	})
	for _, body := range []string{
		"<!DOCTYPE html>\n<html><body>Sign in to continue</body></html>",
		"Internal Server Error\n",
		`{"detail":"Not Found"}`,
		`[{"choices":[]}]`,
		`{"choices":[{"delta":{"content":"a chunk without data:"}}]}` + "\n" + `{"choices":[]}`,
		"\xEF\xBB\xBF<html>",
		"hello: world\n\n",
	} {
		t.Run("not a stream "+body[:min(len(body), 12)], func(t *testing.T) {
			text, err := readAll(wire.NewReader(strings.NewReader(body)))
			var ne *wire.NotStreamError
			if !errors.As(err, &ne) {
				t.Fatalf("end = %v (%T), want *NotStreamError", err, err)
			}
			if errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%v is not truncation", err)
			}
			if text != "" {
				t.Errorf("content = %q, want none", text)
			}
			start := strings.TrimPrefix(body, "\xEF\xBB\xBF")[:min(len(body)-3, 10)]
			if !strings.Contains(string(ne.Start), start) || !strings.Contains(err.Error(), start) {
				t.Errorf("error %q (start %q) does not show the body's start %q", err, ne.Start, start)
			}
		})
	}
	t.Run("json body cut", func(t *testing.T) {
		body := io.MultiReader(strings.NewReader(`{"id":"x","object":"chat.completion","choices":[{"mess`), iotest.ErrReader(io.ErrUnexpectedEOF))
		if _, err := readAll(wire.NewReader(body)); !errors.Is(err, wire.ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("end = %v, want ErrTruncated with its cause", err)
		}
	})
}

// Bodies that are event streams, whatever their first line.
func TestEventStreamStarts(t *testing.T) {
	f := frame(map[string]any{"content": "a"}, "stop") + done
	for _, body := range []string{
		f, "\n\n" + f, "\r\n" + f, ": ping\n\n" + f, "event: message\n" + f, "id: 1\n" + f,
		"retry: 1000\n\n" + f, "data\n\n" + f, "data:" + strings.TrimPrefix(f, "data: "), "\xEF\xBB\xBF" + f,
	} {
		if text, err := readAll(wire.NewReader(strings.NewReader(body))); text != "a" || err != io.EOF {
			t.Errorf("%.20q: got %q, %v; want a, EOF", body, text, err)
		}
	}
	if _, err := readAll(wire.NewReader(strings.NewReader("error: {\"message\":\"x\"}\n\n"))); !errors.As(err, new(*wire.StreamError)) {
		t.Errorf("llama.cpp error field first: %v, want a StreamError", err)
	}
}

// A server that ignores "stream": true answers with one chat.completion
// object: the Reader hands it out as one delta.
func TestWholeCompletion(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","reasoning_content":"think","tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"get_time","arguments":{"tz":"CET"}}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`
	r := wire.NewReader(strings.NewReader(body))
	d, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := stream.Delta{Content: "Checking.", Reasoning: "think", FinishReason: "tool_calls",
		ToolCalls: []stream.ToolCallDelta{{Index: 0, ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Index: 1, ID: "c2", Name: "get_time", Arguments: `{"tz":"CET"}`}},
		Usage:     &stream.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13}}
	if d.Content != want.Content || d.Reasoning != want.Reasoning || d.FinishReason != want.FinishReason || len(d.ToolCalls) != 2 ||
		d.ToolCalls[0] != want.ToolCalls[0] || d.ToolCalls[1] != want.ToolCalls[1] || d.Usage == nil || *d.Usage != *want.Usage {
		t.Errorf("delta = %+v (usage %v), want %+v", *d, d.Usage, want)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("then %v, want io.EOF", err)
	}
	if r.FinishReason() != "tool_calls" || r.Usage() == nil {
		t.Errorf("FinishReason %q Usage %v", r.FinishReason(), r.Usage())
	}
	t.Run("content null, no finish reason", func(t *testing.T) {
		r := wire.NewReader(strings.NewReader(`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`))
		d, err := r.Next()
		if err != nil || len(d.ToolCalls) != 1 || d.Content != "" {
			t.Fatalf("Next = %+v, %v", d, err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("then %v, want io.EOF: a whole object is complete", err)
		}
	})
	t.Run("empty message", func(t *testing.T) {
		r := wire.NewReader(strings.NewReader(`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":""}}]}`))
		if d, err := r.Next(); err != io.EOF {
			t.Errorf("Next = %+v, %v; want io.EOF and no empty delta", d, err)
		}
	})
}

// FuzzErrorBody feeds arbitrary error bodies: ErrorBody never panics, and
// Snippet makes one line of valid text of at most n runes and a "…".
func FuzzErrorBody(f *testing.F) {
	for _, s := range []string{
		`{"error":{"message":"no","type":"t","code":429,"param":"model"}}`, `{"error":"text"}`, `{"error":null}`,
		`{"error":[1]}`, `{"detail":"x"}`, "<html>\n\t<b>502</b>\r\n</html>", "\xff\xfe\x00", "",
	} {
		f.Add([]byte(s), uint8(20))
	}
	f.Fuzz(func(t *testing.T, body []byte, n uint8) {
		if e := wire.ErrorBody(body); e != nil && e.Raw == nil {
			t.Fatalf("ErrorBody(%q) has no Raw", body)
		}
		s := wire.Snippet(body, int(n))
		if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\t") {
			t.Fatalf("Snippet(%q) = %q: not one line of valid text", body, s)
		}
		if c := utf8.RuneCountInString(strings.TrimSuffix(s, "…")); c > int(n) {
			t.Fatalf("Snippet(%q, %d) = %q: %d runes", body, n, s, c)
		}
	})
}
