package stream_test

import (
	"fmt"

	"github.com/planround/planround/stream"
)

func ExampleParser() {
	p := stream.NewParser(stream.Config{})
	show := func(pc stream.Piece) {
		if pc.Text != "" {
			fmt.Printf("%q voice=%v\n", pc.Text, pc.Voice)
		}
	}
	for _, d := range []string{"<voi", "ce>Sure, ", "a < b. <no_", "tool>"} {
		p.Write(d, show)
	}
	p.Flush(show)
	fmt.Printf("raw: %q\n", p.Raw())
	// Output:
	// "Sure, " voice=true
	// "a < b. " voice=true
	// raw: "<voice>Sure, a < b. <no_tool>"
}

func ExampleParser_sentences() {
	p := stream.NewParser(stream.Config{Mode: stream.ModeSentences})
	say := func(pc stream.Piece) { fmt.Printf("%q\n", pc.Text) }
	for _, d := range []string{"Pi is 3.", "14. 你好。Bye", "!"} {
		p.Write(d, say)
	}
	p.Flush(say)
	// Output:
	// "Pi is 3.14. "
	// "你好。"
	// "Bye!"
}

func ExampleAccumulator() {
	var a stream.Accumulator
	fragments := []stream.ToolCallDelta{
		{Index: 1, ID: "toolu_1", Name: "read_file"}, // Anthropic-compatible: index 1
		{Index: 1, ID: "", Arguments: `{"pa`},
		{Index: 1, Name: "", Arguments: `th": "a.txt"}`},
	}
	for _, f := range fragments {
		if slot, started := a.Add(f); started {
			fmt.Println("start:", a.Call(slot).Name)
		}
	}
	for _, c := range a.Calls() {
		fmt.Println(c.ID, c.Name, c.Arguments)
	}
	// Output:
	// start: read_file
	// toolu_1 read_file {"path": "a.txt"}
}
