package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

func TestArgumentsDigest(t *testing.T) {
	digest := func(s string) string { return agent.ArgumentsDigest(json.RawMessage(s)) }

	t.Run("form", func(t *testing.T) {
		// The SHA-256 of the canonical text: keys sorted, no white space,
		// no HTML escaping.
		assert.Equal(t, "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", digest(`{}`))
		assert.Equal(t, "sha256:8ecb15abdc8f2f59d78f9ab898caee4a5c2ce49957460f8acb2424231083ce56", digest(` { "b" : 1, "a" : "\u003c" } `))
	})

	t.Run("same value", func(t *testing.T) {
		for _, tc := range []struct{ name, a, b string }{
			{"key order", `{"city":"Oslo","days":3}`, `{"days":3,"city":"Oslo"}`},
			{"spacing", `{"city":"Oslo","tags":["a","b"]}`, "{\n  \"city\": \"Oslo\",\r\n\t\"tags\": [ \"a\" , \"b\" ]\n}\n"},
			{"nested key order", `{"a":{"y":1,"x":[{"q":1,"p":2}]}}`, `{"a":{"x":[{"p":2,"q":1}],"y":1}}`},
			{"string escapes", `{"s":"é/\"<"}`, `{"s":"\u00e9\/\u0022\u003c"}`},
			{"invalid, with white space around", "{\"city\": \"Par", " \n{\"city\": \"Par\t"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				assert.Equal(t, digest(tc.a), digest(tc.b))
			})
		}
	})

	t.Run("different values", func(t *testing.T) {
		for _, tc := range []struct{ name, a, b string }{
			{"a string", `{"city":"Oslo"}`, `{"city":"Lima"}`},
			{"a type", `{"n":1}`, `{"n":"1"}`},
			{"numbers as written", `{"n":1}`, `{"n":1.0}`},
			// One double, two values a Go tool reads apart (uint64): a
			// client's rounding is checked beside the digest, never in it.
			{"big integers one double apart", `{"n":12345678901234567890}`, `{"n":12345678901234567000}`},
			{"a key", `{"city":"Oslo"}`, `{"town":"Oslo"}`},
			{"array order", `{"a":[1,2]}`, `{"a":[2,1]}`},
			{"an added null", `{"a":1}`, `{"a":1,"b":null}`},
			{"invalid texts", `{"city": "Par`, `{"city": "Pa`},
			{"invalid and its completion", `{"city": "Par`, `{"city":"Par"}`},
			{"trailing bytes", `{"a":1}}`, `{"a":1}`},
			{"a second value", `{"a":1} {}`, `{"a":1}`},
			{"invalid UTF-8", "{\"s\":\"\xff\"}", "{\"s\":\"\xfe\"}"},
			{"invalid UTF-8 and its replacement", "{\"s\":\"\xff\"}", `{"s":"\ufffd"}`},
			{"not JSON white space around", "\u00a0{}", `{}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				assert.NotEqual(t, digest(tc.a), digest(tc.b))
			})
		}
	})

	t.Run("empty is {}", func(t *testing.T) {
		want := digest(`{}`)
		assert.Equal(t, want, agent.ArgumentsDigest(nil))
		assert.Equal(t, want, digest(""))
		assert.Equal(t, want, digest(" \n\t\r "))
		assert.Equal(t, want, digest(`{ }`))
	})
}

// TestApprovalRequiredCarriesDigest: the approval_required chunk carries
// the digest of the arguments it shows, in a run and in a resumed turn that
// shows the card again, and so does the request the Approver gets; the
// other chunks of the call carry none.
func TestApprovalRequiredCarriesDigest(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	srv := newServer(t)
	srv.Enqueue(planNeedTool(), agenttest.Reply().Call(0, "call_1", "get_weather", `{ "city" : "Oslo" }`).Finish("tool_calls"))
	st := &memory.MemStore{}
	k := newKeeper()
	a := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Approver = k }, weatherTool())
	first, err := collect(a.Run(ctx, agent.Input{SessionID: "s1", Message: "Weather in Oslo?"}))
	require.NoError(t, err)
	resumed, err := collect(a.Resume(ctx, "s1"))
	require.NoError(t, err)

	var cards int
	for _, c := range append(first, resumed...) {
		if c.Tool == nil || c.Kind == agent.KindSide {
			continue
		}
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateApprovalRequired {
			cards++
			assert.Equal(t, agent.ArgumentsDigest(c.Tool.Arguments), c.Tool.ArgumentsDigest, "the digest of what the card shows")
			assert.Equal(t, agent.ArgumentsDigest(json.RawMessage(`{"city":"Oslo"}`)), c.Tool.ArgumentsDigest)
			continue
		}
		assert.Empty(t, c.Tool.ArgumentsDigest, "a %s chunk", c.Tool.State)
	}
	assert.Equal(t, 2, cards, "the run's card and the resumed turn's")
	// The Approver was asked with the same digest the card shows.
	require.Len(t, k.requests, 2)
	for _, req := range k.requests {
		assert.Equal(t, agent.ArgumentsDigest(json.RawMessage(`{"city":"Oslo"}`)), req.Call.ArgumentsDigest, "the request's digest")
	}
}
