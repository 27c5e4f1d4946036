package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/planround/planround/stream"
)

const benchFrames = 10000

// benchBody is 10,000 small content frames, a finish frame and [DONE], the
// shape of a typical OpenAI chunk (id, object, created, model, one choice).
func benchBody() []byte {
	const f = `data: {"choices":[{"delta":{"content":"tok"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-1","model":"gpt-test","object":"chat.completion.chunk"}` + "\n\n"
	var b strings.Builder
	for range benchFrames {
		b.WriteString(f)
	}
	b.WriteString(`data: {"choices":[{"delta":{},"finish_reason":"stop","index":0}],"id":"chatcmpl-1"}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// perChunk reports time and allocations per chunk as custom metrics; call
// it after the loop with the MemStats taken before.
func perChunk(b *testing.B, before *runtime.MemStats) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchFrames), "ns/chunk")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*benchFrames), "allocs/chunk")
}

func BenchmarkReader(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		r := NewReader(bytes.NewReader(body))
		n := 0
		for {
			d, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(d.Content)
		}
		if n != 3*benchFrames {
			b.Fatalf("read %d bytes of content", n)
		}
	}
	perChunk(b, &before)
}

// BenchmarkBaselineScannerJSON is the baseline of the same run: a
// bufio.Scanner over lines and encoding/json.Unmarshal into a minimal
// struct.
func BenchmarkBaselineScannerJSON(b *testing.B) {
	type minimal struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(body))
		n := 0
		for sc.Scan() {
			line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok || string(line) == "[DONE]" {
				continue
			}
			var c minimal
			if err := json.Unmarshal(line, &c); err != nil {
				b.Fatal(err)
			}
			if len(c.Choices) > 0 {
				n += len(c.Choices[0].Delta.Content)
			}
		}
		if n != 3*benchFrames {
			b.Fatalf("read %d bytes of content", n)
		}
	}
	perChunk(b, &before)
}

// BenchmarkDecodeFrame is the fast decoder alone on the benchmark frame.
func BenchmarkDecodeFrame(b *testing.B) {
	frame := []byte(`{"choices":[{"delta":{"content":"tok"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-1","model":"gpt-test","object":"chat.completion.chunk"}`)
	var x decoder
	var d stream.Delta
	b.ReportAllocs()
	for b.Loop() {
		if !x.fast(frame, &d) {
			b.Fatal("fell back")
		}
	}
}

// BenchmarkDecodeUsageFrame is the fast decoder alone on OpenAI's usage
// frame, with its details objects (cached and reasoning tokens): the one
// frame per stream that carries the usage.
func BenchmarkDecodeUsageFrame(b *testing.B) {
	frame := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":58,"completion_tokens":12,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":32,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`)
	var x decoder
	var d stream.Delta
	b.ReportAllocs()
	for b.Loop() {
		if !x.fast(frame, &d) {
			b.Fatal("fell back")
		}
	}
}
