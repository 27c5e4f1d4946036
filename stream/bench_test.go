package stream

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// benchReply is a realistic reply: English and Chinese sentences, a number,
// a '<' that is not a tag, and an intent tag at the end; about 2 KB.
func benchReply() string {
	var b strings.Builder
	for b.Len() < 2000 {
		b.WriteString("The forecast for Paris shows 3.5 mm of rain; take an umbrella if temperature < 12 C. ")
		b.WriteString("明天巴黎有小雨，气温大约十二度。记得带伞！")
		b.WriteString("Would you like me to check the hourly details?\n")
	}
	b.WriteString("<need_tool>")
	return b.String()
}

// splitRunes cuts s into deltas of n runes, as a model streams tokens.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func benchParser(b *testing.B, mode Mode) {
	reply := benchReply()
	deltas := splitRunes(reply, 4)
	p := NewParser(Config{Mode: mode})
	n := 0
	emit := func(pc Piece) { n += len(pc.Text) }
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		p.Reset()
		for _, d := range deltas {
			p.Write(d, emit)
		}
		p.Flush(emit)
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*len(deltas)), "allocs/delta")
	b.ReportMetric(float64(len(deltas)), "deltas/op")
	if n == 0 {
		b.Fatal("no text")
	}
}

func BenchmarkParserDeltas(b *testing.B)    { benchParser(b, ModeDeltas) }
func BenchmarkParserSentences(b *testing.B) { benchParser(b, ModeSentences) }

func BenchmarkAccumulator(b *testing.B) {
	args := `{"city": "Edinburgh", "country": "UK", "units": "c", "days": [1, 2, 3, 4, 5, 6, 7]}`
	parts := splitRunes(args, 4)
	b.ReportAllocs()
	var a Accumulator
	for b.Loop() {
		a.Reset()
		a.Add(ToolCallDelta{Index: 0, ID: "call_1", Name: "weather"})
		for _, p := range parts {
			a.Add(ToolCallDelta{Index: 0, Arguments: p})
		}
		_ = a.Calls()
	}
}

// BenchmarkBaselineCopy is the floor the parser benchmarks compare with on
// a noisy machine: copying the same deltas into a reused buffer and
// calling a callback per delta, with no parsing at all.
func BenchmarkBaselineCopy(b *testing.B) {
	reply := benchReply()
	deltas := splitRunes(reply, 4)
	buf := make([]byte, 0, len(reply))
	n := 0
	emit := func(pc Piece) { n += len(pc.Text) }
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, d := range deltas {
			buf = append(buf, d...)
			emit(Piece{Text: d, Raw: d})
		}
	}
}
