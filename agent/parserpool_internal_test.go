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
// Agent's pool, which keeps none that grew on a long reply, that the next
// round takes one from it, and that a reply survives its parser's reuse by
// the next run.
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
	// The planning round's parser went back and the answer took it again,
	// and grew it past the bound.
	if n := a.parsers.len(); n != 0 {
		t.Fatalf("after the long answer the pool keeps %d parsers, want none", n)
	}
	run("short one")
	run("another short one") // on a parser the previous run gave back
	if n := a.parsers.len(); n != 1 {
		t.Fatalf("after three runs one after the other the pool keeps %d parsers, want 1", n)
	}
}

// TestParserPoolBound checks that the pool keeps at most maxIdleParsers:
// the parsers of many runs that wait at once are left to the collector.
func TestParserPoolBound(t *testing.T) {
	var pp parserPool
	for range maxIdleParsers + 10 {
		pp.put(stream.NewParser(stream.Config{}))
	}
	if n := pp.len(); n != maxIdleParsers {
		t.Fatalf("the pool keeps %d parsers, want %d", n, maxIdleParsers)
	}
	for range maxIdleParsers {
		if pp.get() == nil {
			t.Fatal("get found no parser in a pool that keeps some")
		}
	}
	if p := pp.get(); p != nil {
		t.Fatal("get found a parser in an empty pool")
	}
}

// len is how many parsers the pool keeps.
func (pp *parserPool) len() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.idle)
}
