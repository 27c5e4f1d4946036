package mcpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

// The transports of the trust tests: a server of its own process over
// stdio, one in the test's process over streamable HTTP.
var trustTransports = []Transport{TransportStdio, TransportHTTP}

// trustServer is a test server with the trust tools (lookup, wipe,
// redefine) named name, trusted or not.
func trustServer(t *testing.T, tr Transport, name string, trusted bool) ServerConfig {
	t.Helper()
	var cfg ServerConfig
	if tr == TransportStdio {
		cfg = stdioConfig(t, name, "-trust")
	} else {
		srv := testserver.New(testserver.Options{Trust: true})
		var ts *httptest.Server = servertest.NewTestStreamableHTTPServer(srv)
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		cfg = ServerConfig{Name: name, Transport: TransportHTTP, URL: ts.URL + "/mcp", StartTimeout: 10 * time.Second}
	}
	cfg.Trusted = trusted
	return cfg
}

// recordingApprover is a person who approves every call shown to them,
// recording what they were shown.
type recordingApprover struct {
	mu    sync.Mutex
	calls []agent.ToolCall
}

func (a *recordingApprover) Request(ctx context.Context, req agent.ApprovalRequest) (agent.Ticket, error) {
	a.mu.Lock()
	a.calls = append(a.calls, req.Call)
	a.mu.Unlock()
	return agent.Pending("ap-"+req.Call.ID, func(ctx context.Context) (agent.Decision, error) {
		return agent.Decision{Approved: true}, nil
	}), nil
}

// take returns the calls shown since the last take.
func (a *recordingApprover) take() []agent.ToolCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.calls
	a.calls = nil
	return out
}

func callNames(calls []agent.ToolCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Name)
	}
	return out
}

// runCalls runs one turn of a on a model that calls the tools of calls
// (name → arguments, in order) and then answers, and returns the tool
// chunks.
func runCalls(t *testing.T, a *agent.Agent, model *agenttest.Server, ctx context.Context, calls ...[2]string) []agent.ToolCall {
	t.Helper()
	r := agenttest.Reply()
	for i, c := range calls {
		r = r.Call(i, "call_"+itoa(i+1), c[0], c[1])
	}
	model.Enqueue(r.Finish("tool_calls"), agenttest.Reply().Text("Done.").Finish("stop"))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return toolChunks(collect(t, a, ctx, agent.Input{SessionID: "s1", Message: "go"}))
}

// resultsOf are the results of the calls, by tool name.
func resultsOf(chunks []agent.ToolCall) map[string]string {
	out := map[string]string{}
	for _, c := range chunks {
		switch c.State {
		case agent.StateResult:
			out[c.Name] = c.Result
		case agent.StateRejected:
			out[c.Name] = "rejected: " + c.Reason
		}
	}
	return out
}

// cardsOf are the names of the calls that showed an approval card.
func cardsOf(chunks []agent.ToolCall) []string {
	var out []string
	for _, c := range chunks {
		if c.State == agent.StateApprovalRequired {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestTrustedReadOnlyHints: under the opt-in policy a trusted server's
// read-only, closed-world tool runs without a card; the same tool of an
// untrusted server asks, showing its hints as untrusted; a trusted
// destructive tool asks.
func TestTrustedReadOnlyHints(t *testing.T) {
	for _, tr := range trustTransports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			c := newClient(t, Options{}, trustServer(t, tr, "trusted", true), trustServer(t, tr, "untrusted", false))
			model := agenttest.NewServer()
			t.Cleanup(model.Close)
			person := &recordingApprover{}
			a := newAgent(t, c, model, approval.Chain(person, approval.ReadOnlyHints()))

			chunks := runCalls(t, a, model, context.Background(),
				[2]string{"trusted__lookup", `{"key":"k1"}`},
				[2]string{"untrusted__lookup", `{"key":"k2"}`},
				[2]string{"trusted__wipe", `{}`})

			want := map[string]string{"trusted__lookup": "lookup: k1", "untrusted__lookup": "lookup: k2", "trusted__wipe": "wiped"}
			if got := resultsOf(chunks); !mapsEqual(got, want) {
				t.Errorf("results = %v, want %v", got, want)
			}
			if got := cardsOf(chunks); !slices.Equal(got, []string{"untrusted__lookup", "trusted__wipe"}) {
				t.Errorf("cards shown for %v, want the untrusted lookup and the wipe", got)
			}
			asked := person.take()
			if got := callNames(asked); !slices.Equal(got, []string{"untrusted__lookup", "trusted__wipe"}) {
				t.Fatalf("the person was asked about %v", got)
			}
			if h := asked[0].Hints; h == nil || *h != (agent.ToolHints{ReadOnly: true, Idempotent: true}) {
				t.Errorf("untrusted lookup hints = %+v, want read-only, idempotent, closed world, untrusted", h)
			}
			if h := asked[1].Hints; h == nil || *h != (agent.ToolHints{Destructive: true, Trusted: true}) {
				t.Errorf("wipe hints = %+v, want destructive, closed world, trusted", h)
			}
			for _, ch := range chunks {
				if ch.Name == "trusted__lookup" && ch.State != agent.StateStart && (ch.Hints == nil || !ch.Hints.SafeToRun()) {
					t.Errorf("trusted lookup chunk %s has hints %+v", ch.State, ch.Hints)
				}
				if ch.MustAsk || len(ch.Details) > 0 {
					t.Errorf("chunk %s of %s must ask (%v): nothing changed", ch.State, ch.Name, ch.Details)
				}
			}
		})
	}
}

// listed returns the tool mcpName as c's server lists it now (its Tools
// offer the model the pinned definition).
func listed(t *testing.T, c *Client, mcpName string) *toolSpec {
	t.Helper()
	for _, e := range c.entries {
		if s := e.spec(mcpName); s != nil {
			return s
		}
	}
	t.Fatalf("no server lists %q", mcpName)
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

type userKey struct{}

func withUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

func userOf(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// TestChangedDefinitionAsks: a tool whose definition changed since it was
// pinned asks a person, even a trusted read-only tool under the policy,
// with the differences; once approved it runs and is pinned for that user,
// so the next call runs without asking, while another user still has the
// first list pinned and is asked. A tool added later asks once as well.
func TestChangedDefinitionAsks(t *testing.T) {
	for _, tr := range trustTransports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			checkChangedDefinitionAsks(t, tr, new(memory.MemStore))
		})
	}
}

func checkChangedDefinitionAsks(t *testing.T, tr Transport, kv memory.KV) {
	c := newClient(t, Options{KV: kv, UserOf: userOf}, trustServer(t, tr, "files", true))
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	person := &recordingApprover{}
	a := newAgent(t, c, model, approval.Chain(person, approval.ReadOnlyHints()))
	alice := withUser(context.Background(), "alice")
	bob := withUser(context.Background(), "bob")
	lookup := [2]string{"lookup", `{"key":"k"}`}

	// As first listed: no card.
	if got := cardsOf(runCalls(t, a, model, alice, lookup)); len(got) != 0 {
		t.Fatalf("cards for %v before any change", got)
	}
	if _, err := run(t, tool(t, c, "redefine"), `{}`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new definition is listed", func() bool {
		return strings.Contains(listed(t, c, "lookup").desc, "elsewhere")
	})

	// Changed: alice is asked, with what changed, and the call runs once
	// approved.
	chunks := runCalls(t, a, model, alice, lookup)
	asked := person.take()
	if got := callNames(asked); !slices.Equal(got, []string{"lookup"}) {
		t.Fatalf("asked about %v, want the changed lookup", got)
	}
	if !asked[0].MustAsk {
		t.Error("the changed lookup does not say it must ask")
	}
	details := strings.Join(asked[0].Details, "\n")
	for _, want := range []string{
		`Server "files" changed the definition of the tool "lookup"`,
		`Description: "Looks a key up." → "Looks a key up, and sends it elsewhere."`,
		`Input schema: properties added: "exact"`,
	} {
		if !strings.Contains(details, want) {
			t.Errorf("details do not say %q:\n%s", want, details)
		}
	}
	var card *agent.ToolCall
	for i, ch := range chunks {
		if ch.State == agent.StateApprovalRequired {
			card = &chunks[i]
		}
	}
	if card == nil || !card.MustAsk || strings.Join(card.Details, "\n") != details {
		t.Errorf("the approval card does not show the differences: %+v", card)
	}
	if got := resultsOf(chunks)["lookup"]; got != "lookup: k" {
		t.Errorf("lookup = %q after approval", got)
	}

	// Pinned for alice: no card any more.
	if got := cardsOf(runCalls(t, a, model, alice, lookup)); len(got) != 0 {
		t.Errorf("cards for %v after alice approved the change", got)
	}
	if asked := person.take(); len(asked) != 0 {
		t.Errorf("asked about %v after alice approved the change", callNames(asked))
	}

	// Bob has the first list pinned: he is asked.
	runCalls(t, a, model, bob, lookup)
	if asked := person.take(); len(asked) != 1 || !asked[0].MustAsk {
		t.Errorf("bob was asked about %+v, want the changed lookup", asked)
	}

	// A tool added later asks once, for the user who runs it.
	if _, err := run(t, tool(t, c, "add_tool"), `{}`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new tool is listed", func() bool { return slices.Contains(c.Servers()[0].Tools, "late") })
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	a2, err := agent.New(agent.Config{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any", Tools: reg,
		Approver: approval.Chain(person, approval.AllowTools("late")), DisablePlanning: true})
	if err != nil {
		t.Fatal(err)
	}
	late := [2]string{"late", `{}`}
	if got := resultsOf(runCalls(t, a2, model, alice, late))["late"]; got != "late" {
		t.Errorf("late = %q", got)
	}
	asked = person.take()
	if len(asked) != 1 || !asked[0].MustAsk || !strings.Contains(strings.Join(asked[0].Details, "\n"), `offers the tool "late", which was not in its list`) {
		t.Errorf("the new tool was asked as %+v, want a card that says it is new despite the allow list", asked)
	}
	runCalls(t, a2, model, alice, late)
	if asked := person.take(); len(asked) != 0 {
		t.Errorf("the approved new tool asked again: %+v", asked)
	}
}

// A configuration file's "trusted" marks a server trusted; without it a
// server is not.
func TestParseConfigTrusted(t *testing.T) {
	cfgs, err := ParseConfig([]byte(`{"mcpServers": {"a": {"command": "x", "trusted": true}, "b": {"command": "y"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfgs[0].Trusted || cfgs[1].Trusted {
		t.Errorf("trusted = %v, %v; want true, false", cfgs[0].Trusted, cfgs[1].Trusted)
	}
}

// TestPinsOnSQLite: the pins are kept in a SQLite file. Approving a
// changed definition pins it for that user; after a restart (a new client
// and store on the same file, and a server that now lists the changed
// definition first) the first list pinned before still stands: the user who
// approved runs the tool without a card, another user is asked.
func TestPinsOnSQLite(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	path := filepath.Join(t.TempDir(), "pins.db")
	cfg := trustServer(t, TransportHTTP, "files", true)
	model := agenttest.NewServer()
	t.Cleanup(model.Close)
	person := &recordingApprover{}
	alice := withUser(context.Background(), "alice")
	bob := withUser(context.Background(), "bob")
	lookup := [2]string{"lookup", `{"key":"k"}`}

	open := func() (*Client, *agent.Agent, func()) {
		t.Helper()
		st, err := sqlitestore.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := New(ctx, []ServerConfig{cfg}, Options{KV: st, UserOf: userOf})
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		return c, newAgent(t, c, model, approval.Chain(person, approval.ReadOnlyHints())), func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}
	}

	c, a, closeAll := open()
	if _, err := run(t, tool(t, c, "redefine"), `{}`, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new definition is listed", func() bool {
		return strings.Contains(listed(t, c, "lookup").desc, "elsewhere")
	})
	runCalls(t, a, model, alice, lookup)
	if asked := person.take(); len(asked) != 1 || !asked[0].MustAsk {
		t.Fatalf("alice was asked about %+v, want the changed lookup", asked)
	}
	closeAll()

	c, a, closeAll = open()
	defer closeAll()
	if !strings.Contains(listed(t, c, "lookup").desc, "elsewhere") {
		t.Fatal("the restarted client does not list the changed definition first")
	}
	if got := resultsOf(runCalls(t, a, model, alice, lookup))["lookup"]; got != "lookup: k" {
		t.Errorf("lookup = %q", got)
	}
	if asked := person.take(); len(asked) != 0 {
		t.Errorf("alice was asked about %v after a restart, having approved the change", callNames(asked))
	}
	runCalls(t, a, model, bob, lookup)
	if asked := person.take(); len(asked) != 1 || !asked[0].MustAsk {
		t.Errorf("bob was asked about %+v, want the changed lookup: the first list stays pinned across restarts", asked)
	}
}

// TestHintsOfAnnotations: a tool is read-only, idempotent or open-world
// only when it says so, and destructive unless it says it is read-only or
// not destructive; a trusted tool that says readOnlyHint without
// openWorldHint is one ReadOnlyHints lets run, and mcp-go's NewTool, which
// says openWorldHint true unless told otherwise, makes one that asks.
func TestHintsOfAnnotations(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name string
		a    mcp.ToolAnnotation
		want agent.ToolHints
		safe bool
	}{
		{"nothing said", mcp.ToolAnnotation{}, agent.ToolHints{Destructive: true, Trusted: true}, false},
		{"read-only, open world not said", mcp.ToolAnnotation{ReadOnlyHint: &yes}, agent.ToolHints{ReadOnly: true, Trusted: true}, true},
		{"read-only, closed world", mcp.ToolAnnotation{ReadOnlyHint: &yes, OpenWorldHint: &no}, agent.ToolHints{ReadOnly: true, Trusted: true}, true},
		{"read-only, open world", mcp.ToolAnnotation{ReadOnlyHint: &yes, OpenWorldHint: &yes}, agent.ToolHints{ReadOnly: true, OpenWorld: true, Trusted: true}, false},
		{"read-only and destructive", mcp.ToolAnnotation{ReadOnlyHint: &yes, DestructiveHint: &yes}, agent.ToolHints{ReadOnly: true, Trusted: true}, true},
		{"writes, not destructive", mcp.ToolAnnotation{ReadOnlyHint: &no, DestructiveHint: &no, IdempotentHint: &yes}, agent.ToolHints{Idempotent: true, Trusted: true}, false},
		{"mcp-go's defaults with read-only", mcp.NewTool("x", mcp.WithReadOnlyHintAnnotation(true)).Annotations, agent.ToolHints{ReadOnly: true, OpenWorld: true, Trusted: true}, false},
	}
	for _, c := range cases {
		got := hintsOf(c.a, true)
		if got != c.want {
			t.Errorf("%s: hints %+v, want %+v", c.name, got, c.want)
		}
		if got.SafeToRun() != c.safe {
			t.Errorf("%s: SafeToRun = %v, want %v", c.name, got.SafeToRun(), c.safe)
		}
		untrusted := hintsOf(c.a, false)
		if untrusted.SafeToRun() {
			t.Errorf("%s: untrusted hints are safe to run", c.name)
		}
	}
}
