package mcpclient

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// elicitFixture is a server with the elicitation tools on the transport
// (stdio or streamable HTTP), at the protocol version (empty: the newest,
// where a request for input is a multi round-trip result; a legacy one,
// where it is an elicitation/create request of the server).
func elicitFixture(t *testing.T, tr Transport, version string) ServerConfig {
	t.Helper()
	var cfg ServerConfig
	switch tr {
	case TransportStdio:
		cfg = stdioConfig(t, "asker", "-elicit")
	case TransportHTTP:
		release := make(chan struct{})
		ts := servertest.NewTestStreamableHTTPServer(testserver.New(testserver.Options{Release: release, Elicit: true}))
		t.Cleanup(func() {
			close(release)
			ts.CloseClientConnections()
			ts.Close()
		})
		cfg = ServerConfig{Name: "asker", Transport: TransportHTTP, URL: ts.URL + "/mcp", StartTimeout: 10 * time.Second}
	default:
		t.Fatalf("no elicitation fixture for %q", tr)
	}
	cfg.ProtocolVersion = version
	return cfg
}

// elicitTurn runs a turn in session s1 whose model calls tool once; answer
// is given every elicitation_request shown, and what it returns is the
// reply. It returns the call's result (or error text) and the requests
// shown.
func elicitTurn(t *testing.T, c *Client, forms *person.Forms, tool string, answer func(interact.ElicitationRequest) interact.ElicitationAnswer) (string, []interact.ElicitationRequest) {
	t.Helper()
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	model.Enqueue(
		agenttest.Reply().Call(0, "call_1", tool, `{}`).Finish("tool_calls"),
		agenttest.Reply().Text("Done.").Finish("stop"),
	)
	a := newAgent(t, c, model, agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
		return agent.Decision{Approved: true}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if forms != nil {
		ctx = interact.WithAsker(ctx, forms) // as a runner does for its runs
	}
	var shown []interact.ElicitationRequest
	result := ""
	for ch, err := range a.Run(ctx, agent.Input{SessionID: "s1", Message: "go"}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if ch.Kind == agent.KindSide {
			req, ok := ch.Side.(interact.ElicitationRequest)
			if !ok {
				t.Fatalf("side %T, want an ElicitationRequest", ch.Side)
			}
			shown = append(shown, req)
			ans := answer(req)
			open, err := forms.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: req.FormID, Elicitation: &ans, By: "tester"})
			if err != nil || !open {
				t.Fatalf("Answer = %v, %v; want true, nil", open, err)
			}
		}
		if ch.Kind == agent.KindToolCall && ch.Tool != nil && ch.Tool.Result != "" {
			result = ch.Tool.Result
		}
		if ch.Kind == agent.KindToolRejected && ch.Tool != nil {
			result = "rejected: " + ch.Tool.Reason
		}
	}
	return result, shown
}

func newForms(t *testing.T) *person.Forms {
	t.Helper()
	f, err := person.StartForms(person.FormsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// A server's request for input, in form and URL mode, in both protocol eras
// and over stdio and streamable HTTP, becomes a form of the call's session;
// the answer (accept with content, decline, cancel) goes back to the server,
// and a form asking for a secret is declined without being shown.
func TestElicitation(t *testing.T) {
	leaktest.Check(t)
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
			era := "mrtr"
			if version != "" {
				era = "legacy"
			}
			t.Run(string(tr)+"/"+era, func(t *testing.T) {
				forms := newForms(t)
				c := newClient(t, Options{}, elicitFixture(t, tr, version))

				got, shown := elicitTurn(t, c, forms, "ask", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
					return interact.ElicitationAnswer{Action: interact.ActionAccept, Content: map[string]any{"name": "Ada", "age": 36}}
				})
				// The call is re-issued with the state (by the client, or
				// by mcp-go's bridge in the server for a legacy client).
				want := "accept name=Ada age=36 state=state-1"
				if got != want {
					t.Errorf("ask accepted: result %q, want %q", got, want)
				}
				if len(shown) != 1 {
					t.Fatalf("shown %d requests, want 1", len(shown))
				}
				r := shown[0]
				if r.Type != interact.TypeElicitationRequest || r.Server != "asker" || r.Mode != interact.ModeForm || r.Message != "Who are you?" ||
					len(r.Fields) != 2 || r.Fields[0].Name != "age" && r.Fields[0].Name != "name" {
					t.Errorf("shown %+v", r)
				}

				for _, action := range []string{interact.ActionDecline, interact.ActionCancel} {
					got, _ := elicitTurn(t, c, forms, "ask", func(interact.ElicitationRequest) interact.ElicitationAnswer {
						return interact.ElicitationAnswer{Action: action}
					})
					if got != action {
						t.Errorf("ask %sd: result %q", action, got)
					}
				}

				got, shown = elicitTurn(t, c, forms, "ask_secret", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
					t.Errorf("a form asking for a password was shown: %+v", r)
					return interact.ElicitationAnswer{Action: interact.ActionCancel}
				})
				if !strings.HasPrefix(got, "decline\n(the client declined the server's request for input: a form must not ask for a secret: field \"password\"") || len(shown) != 0 {
					t.Errorf("ask_secret: result %q, shown %d; want decline with why, none shown", got, len(shown))
				}

				if version != "" {
					return // URL mode is for the newer protocol (mcp-go refuses it before)
				}
				got, shown = elicitTurn(t, c, forms, "ask_url", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
					return interact.ElicitationAnswer{Action: interact.ActionAccept}
				})
				if got != "accept" || len(shown) != 1 || shown[0].Mode != interact.ModeURL || shown[0].Host != "auth.example.com" ||
					shown[0].URL != "https://auth.example.com/link?code=7" || len(shown[0].Fields) != 0 {
					t.Errorf("ask_url: result %q, shown %+v", got, shown)
				}
			})
		}
	}
}

// A content that does not fit the requested schema is refused, with what
// does not fit, and the form stays open for a valid answer.
func TestElicitationInvalidContent(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t)
	c := newClient(t, Options{}, elicitFixture(t, TransportHTTP, ""))
	var once sync.Once
	got, _ := elicitTurn(t, c, forms, "ask", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
		once.Do(func() {
			ctx := context.Background()
			for _, bad := range []map[string]any{{"age": 3}, {"name": "Ada", "age": -1}, {"name": "Ada", "age": "old"}, {"name": "Ada", "colour": "red"}} {
				open, err := forms.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: r.FormID,
					Elicitation: &interact.ElicitationAnswer{Action: interact.ActionAccept, Content: bad}})
				if open || err == nil || !strings.Contains(err.Error(), "invalid answers") {
					t.Errorf("content %v: Answer = %v, %v; want an invalid answers error", bad, open, err)
				}
			}
			open, err := forms.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: r.FormID, Answers: interact.Answers{"q1": {"x"}}})
			if open || err == nil {
				t.Errorf("answers of a question form: Answer = %v, %v; want an error", open, err)
			}
			open, err = forms.Answer(ctx, interact.FormReply{SessionID: "s2", FormID: r.FormID, Elicitation: &interact.ElicitationAnswer{Action: interact.ActionDecline}})
			if open || err == nil {
				t.Errorf("another session's answer: Answer = %v, %v; want an error", open, err)
			}
		})
		return interact.ElicitationAnswer{Action: interact.ActionAccept, Content: map[string]any{"name": "Bo"}}
	})
	if got != "accept name=Bo age= state=state-1" {
		t.Errorf("result %q", got)
	}
}

// Without an asker in the run's context nobody can answer: a server that
// asks, in either protocol era, over stdio and streamable HTTP, is told
// decline at once, nothing is shown, and the call's result says why.
func TestElicitationWithoutAsker(t *testing.T) {
	leaktest.Check(t)
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
			t.Run(string(tr)+"/"+version, func(t *testing.T) {
				c := newClient(t, Options{}, elicitFixture(t, tr, version))
				got, shown := elicitTurn(t, c, nil, "ask", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
					t.Errorf("shown %+v", r)
					return interact.ElicitationAnswer{}
				})
				if got != "decline\n(the client declined the server's request for input: no person can answer: the run has no one to ask (no interact.Asker in its context))" || len(shown) != 0 {
					t.Errorf("result %q, shown %d; want the server's answer to a decline, and why", got, len(shown))
				}
				if tool(t, c, "ask").Definition().Resumable {
					t.Error("a tool whose run has no asker is resumable")
				}
			})
		}
	}
}

// A call that belongs to no conversation has nobody to ask: the server is
// told decline, and the result says why.
func TestElicitationWithoutSession(t *testing.T) {
	leaktest.Check(t)
	forms := newForms(t)
	c := newClient(t, Options{}, elicitFixture(t, TransportHTTP, ""))
	ctx, cancel := context.WithTimeout(interact.WithAsker(context.Background(), forms), 20*time.Second)
	defer cancel()
	got, err := tool(t, c, "ask").Execute(ctx, []byte(`{}`), &buffer{})
	if err != nil || got != "decline\n(the client declined the server's request for input: no person can answer: the run has no session)" {
		t.Errorf("ask without a session = %q, %v", got, err)
	}
	if tool(t, c, "ask").Definition().Resumable {
		t.Error("a tool of a client that elicits is resumable: a call that stopped before its server asked would be sent twice")
	}
}

// The reference server asks with elicitation/create requests of its own
// (protocol 2025-11-25), in form mode with every kind of field the
// specification has, and in URL mode; it lists those tools only to a
// client that declares the capability.
func TestElicitationEverything(t *testing.T) {
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			forms := newForms(t)
			c := newClient(t, Options{}, everythingConfig(t, tr))

			got, shown := elicitTurn(t, c, forms, "trigger-elicitation-request", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
				return interact.ElicitationAnswer{Action: interact.ActionAccept, Content: map[string]any{
					"name": "Ada", "integer": 7, "untitledMultipleSelectEnum": []any{"Piano"}, "titledSingleSelectEnum": "hero-3",
				}}
			})
			if !strings.Contains(got, "- Name: Ada") || !strings.Contains(got, "- Favorite Integer: 7") {
				t.Errorf("form accepted: result %q", got)
			}
			if len(shown) != 1 || len(shown[0].Fields) != 13 {
				t.Fatalf("shown %+v, want one form of 13 fields", shown)
			}
			byName := map[string]interact.ElicitField{}
			for _, f := range shown[0].Fields {
				byName[f.Name] = f
			}
			if f := byName["titledMultipleSelectEnum"]; f.Type != "array" || strings.Join(f.Labels, ",") != "Tuna,Salmon,Trout" {
				t.Errorf("titled multiple select: %+v", f)
			}
			if f := byName["legacyTitledEnum"]; strings.Join(f.Labels, ",") != "Cats,Dogs,Birds,Fish,Reptiles" {
				t.Errorf("legacy titled enum: %+v", f)
			}
			if f := byName["name"]; !f.Required || f.Description != "Your full, legal name" {
				t.Errorf("name: %+v", f)
			}

			got, _ = elicitTurn(t, c, forms, "trigger-elicitation-request", func(interact.ElicitationRequest) interact.ElicitationAnswer {
				return interact.ElicitationAnswer{Action: interact.ActionDecline}
			})
			if !strings.Contains(got, "declined") {
				t.Errorf("form declined: result %q", got)
			}
		})
	}
}
