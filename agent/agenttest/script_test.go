package agenttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

// weatherAgent returns an agent of model's URL and client with one tool,
// get_weather, that counts its calls in ran.
func weatherAgent(t *testing.T, url string, client *http.Client, ran *atomic.Int32, configure ...func(*agent.Config)) *agent.Agent {
	t.Helper()
	weather := agent.NewTool("get_weather", "Current weather for a city.",
		func(context.Context, struct {
			City string `json:"city"`
		}, agent.Progress) (string, error) {
			ran.Add(1)
			return "sunny", nil
		}, agent.WithSkipApproval())
	tools, err := agent.NewToolRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{BaseURL: url, HTTPClient: client, Model: "m", Tools: tools}
	for _, f := range configure {
		f(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runTurn runs one turn and returns its chunks and the run's error.
func runTurn(t *testing.T, a *agent.Agent, message string) ([]agent.Chunk, error) {
	t.Helper()
	var chunks []agent.Chunk
	for c, err := range a.Run(t.Context(), agent.Input{Message: message}) {
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

// TestUnofferedCallsAreNotServed: a reply that calls a tool its request
// does not offer (the planning round offers none; a misspelt name is not
// offered) is not served, whether it comes from the script, a Respond
// func or a RespondFunc, a Reply or a recorded stream: the run fails at
// once (the agent does not send the request again) with words that say
// what happened and what to do, and the tool never runs. Unsolicited
// serves it.
func TestUnofferedCallsAreNotServed(t *testing.T) {
	recorded, err := agenttest.ReplayFile("../../testdata/streams/openai-gpt4o-tool-call-in-role-chunk.sse")
	if err != nil {
		t.Fatal(err)
	}
	planningWords := []string{"request 1 offers no tools", "calling get_weather", "planning round", "agenttest.Plan", "agent.Config.DisablePlanning", "Response.Unsolicited"}
	tests := []struct {
		name   string
		script []agenttest.Response // the first one is refused
		want   []string
	}{
		{"a call first", []agenttest.Response{agenttest.CallTool("get_weather", `{"city":"Paris"}`)}, append(planningWords, "Enqueue a planning reply before it")},
		{"words and a call first", []agenttest.Response{agenttest.Reply().Text("Checking.").Call(0, "c1", "get_weather", `{}`).Finish("tool_calls")},
			append(planningWords, `a reply with text "Checking." and calling get_weather`)},
		{"a recorded call first", []agenttest.Response{recorded}, planningWords},
		{"a misspelt tool", []agenttest.Response{agenttest.Plan("Checking."), agenttest.CallTool("get_wether", `{}`)},
			[]string{"request 2 offers the tools get_weather", "calling get_wether", "get_wether is not among them", "unknown tool", "Response.Unsolicited"}},
	}
	for _, tt := range tests {
		check := func(t *testing.T, err error, ran *atomic.Int32, fromRespond, inProcess bool) {
			t.Helper()
			if err == nil {
				t.Fatal("the run ended without an error")
			}
			for _, w := range tt.want {
				switch {
				case fromRespond && strings.HasPrefix(w, "Enqueue"):
					w = "Answer a request without tools (Request.HasTools is false) with a planning reply"
				case inProcess && strings.HasPrefix(w, "request "):
					// In process, requests are not numbered.
					_, w, _ = strings.Cut(w[len("request "):], " ")
					w = "a request " + w
				}
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the run's error lacks %q:\n%v", w, err)
				}
			}
			if n := ran.Load(); n != 0 {
				t.Errorf("the tool ran %d times", n)
			}
		}
		t.Run(tt.name+"/script", func(t *testing.T) {
			leaktest.Check(t)
			srv := agenttest.NewServer()
			defer srv.Close()
			srv.Enqueue(tt.script...)
			srv.Enqueue(agenttest.Reply().Text("Sunny.").Finish("stop"))
			var ran atomic.Int32
			_, err := runTurn(t, weatherAgent(t, srv.URL(), srv.Client(), &ran), "Weather?")
			check(t, err, &ran, false, false)
			if got, want := len(srv.Requests()), len(tt.script); got != want {
				t.Errorf("%d requests, want %d: the refused one is not sent again", got, want)
			}
		})
		t.Run(tt.name+"/Respond", func(t *testing.T) {
			leaktest.Check(t)
			srv := agenttest.NewServer()
			defer srv.Close()
			srv.Respond(func(req *agenttest.Request) agenttest.Response { return tt.script[min(req.Seq, len(tt.script))-1] })
			var ran atomic.Int32
			_, err := runTurn(t, weatherAgent(t, srv.URL(), srv.Client(), &ran), "Weather?")
			check(t, err, &ran, true, false)
			if got, want := len(srv.Requests()), len(tt.script); got != want {
				t.Errorf("%d requests, want %d", got, want)
			}
		})
		t.Run(tt.name+"/RespondFunc", func(t *testing.T) {
			leaktest.Check(t)
			var n atomic.Int32
			model := agenttest.RespondFunc(func(*agenttest.Request) agenttest.Response {
				return tt.script[min(int(n.Add(1)), len(tt.script))-1]
			})
			var ran atomic.Int32
			_, err := runTurn(t, weatherAgent(t, model.URL(), model.Client(), &ran), "Weather?")
			check(t, err, &ran, true, true)
			if got, want := int(n.Load()), len(tt.script); got != want {
				t.Errorf("%d requests, want %d", got, want)
			}
		})
		t.Run(tt.name+"/Unsolicited", func(t *testing.T) {
			leaktest.Check(t)
			srv := agenttest.NewServer()
			defer srv.Close()
			for _, r := range tt.script {
				srv.Enqueue(r.Unsolicited())
			}
			srv.Enqueue(agenttest.Reply().Text("Sunny.").Finish("stop"))
			var ran atomic.Int32
			chunks, err := runTurn(t, weatherAgent(t, srv.URL(), srv.Client(), &ran), "Weather?")
			if err != nil {
				t.Fatal(err)
			}
			if srv.Pending() != 0 {
				t.Errorf("%d responses left", srv.Pending())
			}
			if ran.Load() != 0 {
				t.Error("the tool ran") // a planning round's call, or an unknown tool
			}
			if i := slices.IndexFunc(chunks, func(c agent.Chunk) bool { return c.Kind == agent.KindText && c.Text == "Sunny." }); i < 0 {
				t.Errorf("the run did not reach the answer: %v", chunks)
			}
		})
	}
}

// TestScriptErrorsAreNotRetried: a request the script cannot answer gets
// HTTP 500 with x-should-retry: false, the header openai-go and the agent
// follow: sending it again would find the same script.
func TestScriptErrorsAreNotRetried(t *testing.T) {
	srv := agenttest.NewServer()
	defer srv.Close()
	srv.Enqueue(agenttest.CallTool("f", `{}`))
	for _, want := range []string{"offers no tools", "script exhausted: request 2 (no tools, last message user \"hi\") arrived after the script's 1 response was served"} {
		resp, raw := rawPost(t, srv)
		var body struct{ Error struct{ Message string } }
		if err := json.Unmarshal([]byte(raw), &body); err != nil {
			t.Fatalf("body %s: %v", raw, err)
		}
		if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("status %d, x-should-retry %q; want 500, false", resp.StatusCode, resp.Header.Get("X-Should-Retry"))
		}
		if !strings.Contains(body.Error.Message, want) {
			t.Errorf("message %q lacks %q", body.Error.Message, want)
		}
	}
}

// recorder is a testing.TB that records what fails it and runs its
// cleanups when told, so that a test can see what Start reports.
type recorder struct {
	testing.TB // the real test, for everything else

	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
}

func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// end runs the cleanups, last first, as a test's end does, and returns
// what failed the test.
func (r *recorder) end() []string {
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(cleanups) {
		f()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}

// TestStartReportsTheScript: a Server made by Start fails its test, with
// words that say what happened, when a request finds the script exhausted
// (a planning reply without <no_tool> leads to the tool loop), when a
// reply calls a tool its request does not offer, and, when the test ends,
// for the responses never served (a run that took the <no_tool> path);
// a script that matches the run fails nothing. The server is closed when
// the test ends.
func TestStartReportsTheScript(t *testing.T) {
	tests := []struct {
		name    string
		script  []agenttest.Response
		runErr  bool
		want    []string // in the one error that fails the test; none for a good script
		request int      // requests the server answers
	}{
		{"exhausted", []agenttest.Response{agenttest.Reply().Text("Hello!").Finish("stop")}, true,
			[]string{`script exhausted: request 2 (offering get_weather, last message user "[continue]") arrived after the script's 1 response was served`, "planning round", "<no_tool>"}, 2},
		{"a call first", []agenttest.Response{agenttest.CallTool("get_weather", `{}`)}, true,
			[]string{"request 1 offers no tools", "calling get_weather", "agenttest.Plan"}, 1},
		{"left over", []agenttest.Response{
			agenttest.Reply().Text("Hi! <no_tool>").Finish("stop"),
			agenttest.Reply().Text("How can I help?").Finish("stop"),
			agenttest.CallTool("get_weather", `{}`),
			agenttest.Reply().Text("Sunny.").Finish("stop"),
		}, false, []string{`2 scripted responses were never served (the server received 2 requests): a reply calling get_weather; a reply with text "Sunny."`, "<no_tool>"}, 2},
		{"matching", []agenttest.Response{
			agenttest.Plan("Let me look."),
			agenttest.CallTool("get_weather", `{"city":"Paris"}`),
			agenttest.Reply().Text("Sunny.").Finish("stop"),
		}, false, nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			rec := &recorder{TB: t}
			srv := agenttest.Start(rec)
			srv.Enqueue(tt.script...)
			var ran atomic.Int32
			_, err := runTurn(t, weatherAgent(t, srv.URL(), srv.Client(), &ran), "Weather?")
			if (err != nil) != tt.runErr {
				t.Errorf("run error %v, want one: %v", err, tt.runErr)
			}
			if n := len(srv.Requests()); n != tt.request {
				t.Errorf("%d requests, want %d", n, tt.request)
			}
			errs := rec.end()
			switch {
			case tt.want == nil && len(errs) > 0:
				t.Errorf("a matching script failed the test: %q", errs)
			case tt.want != nil && len(errs) != 1:
				t.Errorf("the test failed %d times, want once: %q", len(errs), errs)
			}
			for _, e := range errs {
				for _, w := range tt.want {
					if !strings.Contains(e, w) {
						t.Errorf("the test's error lacks %q:\n%s", w, e)
					}
				}
				if err != nil && !strings.Contains(err.Error(), e) {
					t.Errorf("the run's error %q does not carry the test's %q", err, e)
				}
			}
			// Closed with the test.
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(streamBody))
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
				t.Error("the server still answers after the test ended")
			}
		})
	}
}

// TestCallToolIDs: each CallTool has a call id of its own, so a run that
// calls the same tool twice records two calls.
func TestCallToolIDs(t *testing.T) {
	srv := agenttest.Start(t)
	srv.Enqueue(agenttest.Plan("Two looks."), agenttest.CallTool("get_weather", `{"city":"Oslo"}`),
		agenttest.CallTool("get_weather", `{"city":"Rome"}`), agenttest.Reply().Text("Done.").Finish("stop"))
	var ran atomic.Int32
	chunks, err := runTurn(t, weatherAgent(t, srv.URL(), srv.Client(), &ran), "Weather?")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			ids[c.Tool.ID] = true
		}
	}
	if len(ids) != 2 || ran.Load() != 2 {
		t.Errorf("results of %d call ids, tool ran %d times; want 2 and 2", len(ids), ran.Load())
	}
}

// TestUserMessage: in every request of a run, UserMessage finds the
// user's words, also after the agent's "[continue]", and in the strict
// shape where the continuation prompt is added to that "[continue]".
func TestUserMessage(t *testing.T) {
	for name, shape := range map[string]agent.RequestShape{"default": agent.ShapeDefault, "strict": agent.ShapeStrict} {
		t.Run(name, func(t *testing.T) {
			srv := agenttest.Start(t)
			srv.Enqueue(agenttest.Reply().Text("Hi! <no_tool>").Finish("stop"), agenttest.Reply().Text("How can I help?").Finish("stop"))
			var ran atomic.Int32
			a := weatherAgent(t, srv.URL(), srv.Client(), &ran, func(c *agent.Config) { c.RequestShape = shape })
			if _, err := runTurn(t, a, "Hello there"); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if m, _ := reqs[1].LastMessageWithRole("user"); !strings.HasPrefix(m.Content, "[continue]") {
				t.Fatalf("the continuation's last user message is %q, not the agent's [continue]", m.Content)
			}
			for _, req := range reqs {
				m, ok := req.UserMessage()
				// Strict: the planning prompt is added to the user's message.
				if !ok || m.Role != "user" || !strings.HasPrefix(m.Content, "Hello there") {
					t.Errorf("request %d: UserMessage() = %+v, %v; want the user's", req.Seq, m, ok)
				}
			}
		})
	}
	var none agenttest.Request
	if m, ok := none.UserMessage(); ok || m.Role != "" {
		t.Errorf("UserMessage of no messages = %+v, %v", m, ok)
	}
}
