package aisdk

import (
	"encoding/json"
	"io"
	"strconv"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/runner"
)

// BenchmarkTextDelta is the cost of one streamed text delta: the Writer's
// chunk, against what the web chat writes for it (the agent.Chunk's JSON
// by encoding/json in one SSE event with its id). Both write to
// io.Discard, without flushing.
//
//	go test -run '^$' -bench BenchmarkTextDelta -benchmem -count 6 ./ui/aisdk/
func BenchmarkTextDelta(b *testing.B) {
	chunk := &agent.Chunk{Kind: agent.KindText, Round: 1, Text: "The weather in Lima ", Raw: "The weather in Lima "}
	b.Run("webchat-json", func(b *testing.B) {
		b.ReportAllocs()
		seq := int64(0)
		for b.Loop() {
			seq++
			e := runner.Event{Seq: seq, Turn: 1, Kind: runner.EventChunk, Chunk: chunk}
			data, err := json.Marshal(e.Chunk)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, len(data)+48)
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, e.Seq, 10)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, data...)
			buf = append(buf, "\n\n"...)
			io.Discard.Write(buf)
		}
	})
	b.Run("aisdk", func(b *testing.B) {
		w := NewWriter(io.Discard, nil)
		w.Event(runner.Event{Seq: 1, Turn: 1, Kind: runner.EventTurnStarted, Started: &runner.TurnStarted{}})
		b.ReportAllocs()
		seq := int64(1)
		for b.Loop() {
			seq++
			w.Event(runner.Event{Seq: seq, Turn: 1, Kind: runner.EventChunk, Chunk: chunk})
		}
	})
	// A fragment of a call's arguments (Config.StreamToolArguments), its
	// tool part shown already.
	input := &agent.Chunk{Kind: agent.KindToolInput, Round: 1, Text: `{"city":"Li`, Tool: &agent.ToolCall{ID: "call_1", Name: "get_weather", State: agent.StateStart}}
	b.Run("aisdk-tool-input", func(b *testing.B) {
		w := NewWriter(io.Discard, nil)
		w.Event(runner.Event{Seq: 1, Turn: 1, Kind: runner.EventChunk, Chunk: input})
		b.ReportAllocs()
		seq := int64(1)
		for b.Loop() {
			seq++
			w.Event(runner.Event{Seq: seq, Turn: 1, Kind: runner.EventChunk, Chunk: input})
		}
	})
}
