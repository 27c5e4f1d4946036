package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/stream"
)

// TestParserPool checks that a run gives its rounds' parsers back to the
// Agent's pool, which keeps none that grew on a long reply, and that a
// reply survives its parser's reuse by the next run.
func TestParserPool(t *testing.T) {
	long := strings.Repeat("word ", 2*maxPooledParser/5) // twice the bound
	var reply string
	model := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		if len(req.Messages) == 1 { // the planning round
			return agenttest.Reply().Text("Sure.<no_tool>").Finish("stop")
		}
		return agenttest.Reply().Text(reply).Finish("stop")
	})
	a, err := New(Config{BaseURL: "http://model.invalid/v1", Model: "m", HTTPClient: &http.Client{Transport: model}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(want string) {
		t.Helper()
		reply = want
		var got strings.Builder
		for c, err := range a.Run(context.Background(), Input{Message: "go"}) {
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind == KindText && c.Round == 1 {
				got.WriteString(c.Text)
			}
		}
		if got.String() != want {
			t.Fatalf("the answer had %d bytes, want %d", got.Len(), len(want))
		}
	}
	run(long)
	// sync.Pool may drop what it was given (always under -race, at
	// random), so only what it hands out is checked: never a parser that
	// holds the long reply's buffer.
	for range 10 {
		if p, ok := a.parsers.Get().(*stream.Parser); ok && p.Cap() > maxPooledParser {
			t.Fatalf("the pool kept a parser of %d bytes, bound %d", p.Cap(), maxPooledParser)
		}
	}
	run("short one")
	run("another short one") // on a parser the previous run gave back, when the pool kept it
}
