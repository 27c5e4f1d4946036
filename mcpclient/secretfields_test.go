package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/oteltest"
)

// leakyServer is an MCP server that knows token, the secret its client's
// configuration sends it, and writes it in every field it sends:
//
//   - the resource leak://<token>/doc, with the token in its name, title,
//     description and MIME type, whose read gives a part with the token in
//     its URI, MIME type and text;
//   - the template leak://<token>/{name}, its name, title and description;
//   - the prompt prompt_<token> with the argument arg_<token>, both with
//     the token in their titles and descriptions, rendered with the token
//     in its description, a text and an embedded resource's URI, MIME type
//     and text, and "arg=ok" when the argument came under its own name;
//   - the tool ask_form, whose request for input has the token in its
//     message and in the title, description and default of a field, a
//     property's name, the options of an enum (and their enumNames), of a
//     oneOf and of an array's anyOf, and their titles. It answers
//     "restored" when the answer named the property and the options as it
//     wrote them, else what it got, or the action;
//   - the tool ask_link, asking in URL mode to open
//     https://auth.example.com/link?key=<token>, with the token in its
//     message; it answers with the action.
func leakyServer(token string) *server.MCPServer {
	srv := server.NewMCPServer("leaky", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation(),
		server.WithResourceCapabilities(false, false), server.WithPromptCapabilities(false), server.WithRecovery())
	with := func(s string) string { return strings.ReplaceAll(s, "TOKEN", token) }

	doc := mcp.NewResource(with("leak://TOKEN/doc"), with("doc TOKEN"), mcp.WithResourceDescription(with("about TOKEN")),
		mcp.WithMIMEType(with("text/x-TOKEN")))
	doc.Title = with("Doc TOKEN")
	srv.AddResource(doc, func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: with("text/x-TOKEN"), Text: with("the doc of TOKEN")}}, nil
	})
	tpl := mcp.NewResourceTemplate(with("leak://TOKEN/{name}"), with("tpl TOKEN"), mcp.WithTemplateDescription(with("tpl about TOKEN")))
	tpl.Title = with("Tpl TOKEN")
	srv.AddResourceTemplate(tpl, func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: with("filled TOKEN")}}, nil
	})

	prompt := mcp.NewPrompt(with("prompt_TOKEN"), mcp.WithPromptDescription(with("prompt about TOKEN")),
		mcp.WithArgument(with("arg_TOKEN"), mcp.ArgumentDescription(with("arg about TOKEN"))))
	prompt.Title = with("Prompt TOKEN")
	prompt.Arguments[0].Title = with("Arg TOKEN")
	srv.AddPrompt(prompt, func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		arg := "arg=missing"
		if req.Params.Arguments[with("arg_TOKEN")] == "v" {
			arg = "arg=ok"
		}
		return &mcp.GetPromptResult{Description: with("rendered TOKEN"), Messages: []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(with("hello TOKEN "+arg))),
			mcp.NewPromptMessage(mcp.RoleAssistant, mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: with("leak://TOKEN/embedded"), MIMEType: with("text/x-TOKEN"), Text: with("embedded TOKEN")})),
		}}, nil
	})

	var form map[string]any
	if err := json.Unmarshal([]byte(with(`{"type":"object","properties":{
		"note":{"type":"string","title":"Note for TOKEN","description":"described with TOKEN","default":"TOKEN default"},
		"TOKEN_id":{"type":"string","title":"Id"},
		"plan":{"type":"string","enum":["basic","TOKEN-plan"],"enumNames":["Basic","Plan TOKEN"]},
		"tier":{"type":"string","oneOf":[{"const":"TOKEN-tier","title":"Tier TOKEN"},{"const":"free","title":"Free"}]},
		"tags":{"type":"array","items":{"anyOf":[{"const":"TOKEN-tag","title":"Tag TOKEN"},{"const":"x","title":"X"}]}}},
		"required":["TOKEN_id"]}`)), &form); err != nil {
		panic(err)
	}
	srv.AddTool(mcp.NewTool("ask_form", mcp.WithDescription("Asks for a form.")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := server.ElicitationResponse(req.Params.InputResponses, "f")
		if res == nil {
			return server.NewInputRequestBuilder("").Elicit("f", mcp.ElicitationParams{
				Message: with("Fill this in for TOKEN"), RequestedSchema: form,
			}).ToolResult(), nil
		}
		if res.Action != mcp.ElicitationResponseActionAccept {
			return mcp.NewToolResultText(string(res.Action)), nil
		}
		got, _ := json.Marshal(res.Content)
		var c map[string]any
		_ = json.Unmarshal(got, &c)
		tags, _ := c["tags"].([]any)
		if c[with("TOKEN_id")] == "abc" && c["plan"] == with("TOKEN-plan") && c["tier"] == with("TOKEN-tier") &&
			len(tags) == 1 && tags[0] == with("TOKEN-tag") && c["note"] == "hello" {
			return mcp.NewToolResultText("restored"), nil
		}
		return mcp.NewToolResultText("got " + string(got)), nil
	})
	srv.AddTool(mcp.NewTool("ask_link", mcp.WithDescription("Asks to open a link.")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if res := server.ElicitationResponse(req.Params.InputResponses, "l"); res != nil {
			return mcp.NewToolResultText(string(res.Action)), nil
		}
		return server.NewInputRequestBuilder("").Elicit("l", mcp.ElicitationParams{
			Mode: mcp.ElicitationModeURL, Message: with("Open the link of TOKEN"), ElicitationID: "e1",
			URL: with("https://auth.example.com/link?key=TOKEN"),
		}).ToolResult(), nil
	})
	return srv
}

// leakyConfig serves leakyServer over streamable HTTP in the test's
// process, with testToken in the configuration as ${PLANROUND_TEST_TOKEN}.
func leakyConfig(t *testing.T, version string) ServerConfig {
	t.Helper()
	t.Setenv("PLANROUND_TEST_TOKEN", testToken)
	ts := servertest.NewTestStreamableHTTPServer(leakyServer(testToken))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ServerConfig{Name: "leaky", URL: ts.URL + "/mcp", StartTimeout: 10 * time.Second, ProtocolVersion: version,
		Headers: map[string]string{"Authorization": "Bearer ${PLANROUND_TEST_TOKEN}"}}
}

// leaks collects what a person, the model, a log, a chunk or a trace got,
// to look for the secret in.
type leaks struct {
	mu    sync.Mutex
	texts []string
}

func (l *leaks) add(what string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.texts = append(l.texts, what+": "+string(b))
}

func (l *leaks) Write(p []byte) (int, error) {
	l.add("log", string(p))
	return len(p), nil
}

// check fails the test for each text that holds secret.
func (l *leaks) check(t *testing.T, secret string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.texts {
		if strings.Contains(s, secret) {
			t.Errorf("the secret shows in %s", s)
		}
	}
}

// Resources, resource templates and prompts of a server that writes its
// configuration's secret in every field come with the secret redacted, in
// every field; a resource and a prompt listed with a redacted URI or name
// are read and rendered by the names as listed.
func TestResourceFieldsRedacted(t *testing.T) {
	leaktest.Check(t, closeIdleHTTP)
	var seen leaks
	c := newClient(t, Options{Logger: slog.New(slog.NewTextHandler(&seen, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		leakyConfig(t, ""))
	ctx := bounded(t)

	res, err := c.ListResources(ctx, "", "leaky")
	if err != nil || len(res) != 1 {
		t.Fatalf("ListResources = %+v, %v", res, err)
	}
	seen.add("resources", res)
	want := Resource{URI: "leak://[redacted]/doc", Name: "doc [redacted]", Title: "Doc [redacted]",
		Description: "about [redacted]", MIMEType: "text/x-[redacted]", Size: -1}
	if res[0] != want {
		t.Errorf("resource = %+v, want %+v", res[0], want)
	}
	tpls, err := c.ListResourceTemplates(ctx, "", "leaky")
	seen.add("templates", tpls)
	wantTpl := ResourceTemplate{URITemplate: "leak://[redacted]/{name}", Name: "tpl [redacted]", Title: "Tpl [redacted]", Description: "tpl about [redacted]"}
	if err != nil || len(tpls) != 1 || tpls[0] != wantTpl {
		t.Errorf("templates = %+v, %v; want %+v", tpls, err, wantTpl)
	}

	got, err := c.ReadResource(ctx, "", "leaky", res[0].URI)
	seen.add("read", got)
	wantRead := []ResourceContent{{URI: "leak://[redacted]/doc", MIMEType: "text/x-[redacted]", Text: "the doc of [redacted]"}}
	if err != nil || !slices.EqualFunc(got, wantRead, func(a, b ResourceContent) bool { return a.URI == b.URI && a.MIMEType == b.MIMEType && a.Text == b.Text }) {
		t.Errorf("read %q = %+v, %v; want %+v", res[0].URI, got, err, wantRead)
	}
	got, err = c.ReadResource(ctx, "", "leaky", "leak://"+testToken+"/x")
	seen.add("read from the template", got)
	if err != nil || len(got) != 1 || got[0].URI != "leak://[redacted]/x" || got[0].Text != "filled [redacted]" {
		t.Errorf("read from the template = %+v, %v", got, err)
	}

	prompts, err := c.ListPrompts(ctx, "", "leaky")
	seen.add("prompts", prompts)
	wantPrompt := Prompt{Name: "prompt_[redacted]", Title: "Prompt [redacted]", Description: "prompt about [redacted]",
		Arguments: []PromptArgument{{Name: "arg_[redacted]", Title: "Arg [redacted]", Description: "arg about [redacted]"}}}
	if err != nil || len(prompts) != 1 || prompts[0].Name != wantPrompt.Name || prompts[0].Title != wantPrompt.Title ||
		prompts[0].Description != wantPrompt.Description || !slices.Equal(prompts[0].Arguments, wantPrompt.Arguments) {
		t.Fatalf("prompts = %+v, %v; want %+v", prompts, err, wantPrompt)
	}
	rendered, err := c.GetPrompt(ctx, "", "leaky", prompts[0].Name, map[string]string{prompts[0].Arguments[0].Name: "v"})
	seen.add("prompt", rendered)
	if err != nil || rendered.Description != "rendered [redacted]" || len(rendered.Messages) != 2 ||
		rendered.Messages[0].Text != "hello [redacted] arg=ok" ||
		!reflect.DeepEqual(rendered.Messages[1], PromptMessage{Role: "assistant", Text: "embedded [redacted]", MIMEType: "text/x-[redacted]", URI: "leak://[redacted]/embedded"}) {
		t.Errorf("prompt = %+v, %v", rendered, err)
	}
	seen.check(t, testToken)
}

// A server's request for input that writes its configuration's secret in
// every field (the message, a field's title, description and default, a
// property's name, options and their names, the URL of URL mode) is shown
// with the secret redacted everywhere: in the form, the store, the chunks,
// what the model reads, the logs and the spans. An answer naming the
// property and options as shown reaches the server in its own words.
func TestElicitationFieldsRedacted(t *testing.T) {
	for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run("version="+version, func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			var seen leaks
			forms := newForms(t)
			c := newClient(t, Options{Logger: slog.New(slog.NewTextHandler(&seen, &slog.HandlerOptions{Level: slog.LevelDebug}))},
				leakyConfig(t, version))

			tp := &oteltest.TracerProvider{}
			model := agenttest.NewServer()
			t.Cleanup(model.Close)
			reg, err := agent.NewToolRegistry()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(reg); err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "any", Tools: reg,
				DisablePlanning: true, TracerProvider: tp,
				Approver: agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
					return agent.Decision{Approved: true}, nil
				})})
			if err != nil {
				t.Fatal(err)
			}
			turn := func(tool string, answer func(interact.ElicitationRequest) interact.ElicitationAnswer) (string, []interact.ElicitationRequest) {
				t.Helper()
				model.Enqueue(
					agenttest.Reply().Call(0, "call_1", tool, `{}`).Finish("tool_calls"),
					agenttest.Reply().Text("Done.").Finish("stop"),
				)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var shown []interact.ElicitationRequest
				result := ""
				for ch, err := range a.Run(interact.WithAsker(ctx, forms), agent.Input{SessionID: "s1", Message: "go"}) {
					if err != nil {
						t.Fatalf("run: %v", err)
					}
					seen.add("chunk", ch)
					if req, ok := ch.Side.(interact.ElicitationRequest); ok && ch.Kind == agent.KindSide {
						shown = append(shown, req)
						pending, err := forms.Pending(ctx, "s1")
						if err != nil {
							t.Fatal(err)
						}
						seen.add("pending", pending)
						ans := answer(req)
						if open, err := forms.Answer(ctx, interact.FormReply{SessionID: "s1", FormID: req.FormID, Elicitation: &ans, By: "tester"}); err != nil || !open {
							t.Fatalf("Answer = %v, %v", open, err)
						}
					}
					if ch.Kind == agent.KindToolCall && ch.Tool != nil && ch.Tool.Result != "" {
						result = ch.Tool.Result
					}
				}
				return result, shown
			}

			got, shown := turn("ask_form", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
				return interact.ElicitationAnswer{Action: interact.ActionAccept, Content: map[string]any{
					"[redacted]_id": "abc", "plan": "[redacted]-plan", "tier": "[redacted]-tier", "tags": []any{"[redacted]-tag"}, "note": "hello"}}
			})
			if got != "restored" {
				t.Errorf("ask_form: the server got %q, want the names and options it wrote", got)
			}
			if len(shown) != 1 {
				t.Fatalf("shown %d forms", len(shown))
			}
			if r := shown[0]; r.Message != "Fill this in for [redacted]" {
				t.Errorf("message %q", r.Message)
			}
			fields := map[string]interact.ElicitField{}
			for _, f := range shown[0].Fields {
				fields[f.Name] = f
			}
			if f := fields["note"]; f.Title != "Note for [redacted]" || f.Description != "described with [redacted]" || f.Default != "[redacted] default" {
				t.Errorf("note = %+v", f)
			}
			if f, ok := fields["[redacted]_id"]; !ok || !f.Required {
				t.Errorf("the property named with the secret: %+v in %+v", f, shown[0].Fields)
			}
			for name, want := range map[string][2][]string{
				"plan": {{"basic", "[redacted]-plan"}, {"Basic", "Plan [redacted]"}},
				"tier": {{"[redacted]-tier", "free"}, {"Tier [redacted]", "Free"}},
				"tags": {{"[redacted]-tag", "x"}, {"Tag [redacted]", "X"}},
			} {
				if f := fields[name]; !slices.Equal(f.Options, want[0]) || !slices.Equal(f.Labels, want[1]) {
					t.Errorf("%s = %+v, want options %q labelled %q", name, f, want[0], want[1])
				}
			}

			if version == "" { // URL mode is for the newer protocol (mcp-go refuses it before)
				got, shown = turn("ask_link", func(r interact.ElicitationRequest) interact.ElicitationAnswer {
					return interact.ElicitationAnswer{Action: interact.ActionDecline}
				})
				if got != "decline" || len(shown) != 1 || shown[0].URL != "https://auth.example.com/link?key=[redacted]" ||
					shown[0].Host != "auth.example.com" || shown[0].Message != "Open the link of [redacted]" {
					t.Errorf("ask_link: result %q, shown %+v", got, shown)
				}
			}

			for _, r := range model.Requests() {
				seen.add("model request", r)
			}
			for _, s := range tp.Ended() {
				seen.add("span", map[string]any{"name": s.Name, "attributes": s.Attributes, "events": s.Events, "status": s.Status})
			}
			seen.check(t, testToken)
		})
	}
}

// TestRedactForm: a requested schema without secrets goes as it is; one
// whose two property names read the same once redacted is refused (the
// answer could not say which it meant); a name or an option is given back
// as written only when exactly one reads as given.
func TestRedactForm(t *testing.T) {
	red := newRedactor([]string{"s3cr3t-value", "other-secret"})
	if f, err := (redactor{}).form(map[string]any{"type": "object"}); err != nil || string(f.schema) != `{"type":"object"}` {
		t.Errorf("no secrets: %s, %v", f.schema, err)
	}
	if f, err := red.form(nil); err != nil || f.schema != nil {
		t.Errorf("no schema: %s, %v", f.schema, err)
	}
	_, err := red.form(map[string]any{"type": "object", "properties": map[string]any{
		"s3cr3t-value": map[string]any{"type": "string"}, "other-secret": map[string]any{"type": "string"}}})
	if err == nil || !strings.Contains(err.Error(), `read "[redacted]"`) {
		t.Errorf("two properties that read the same: %v", err)
	}
	f, err := red.form(map[string]any{"type": "object", "properties": map[string]any{
		"k": map[string]any{"type": "string", "enum": []any{"a", "s3cr3t-value"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.restore(map[string]any{"k": "[redacted]"}); got["k"] != "s3cr3t-value" {
		t.Errorf("restore = %v", got)
	}
	if got := f.restore(map[string]any{"k": "a"}); got["k"] != "a" {
		t.Errorf("restore = %v", got)
	}

	for _, tc := range []struct {
		given     string
		originals []string
		want      string
	}{
		{"x://[redacted]/a", []string{"x://s3cr3t-value/a", "x://b"}, "x://s3cr3t-value/a"},
		{"x://[redacted]/a", []string{"x://s3cr3t-value/a", "x://other-secret/a"}, "x://[redacted]/a"}, // which one?
		{"x://[redacted]/a", []string{"x://b"}, "x://[redacted]/a"},
		{"x://[redacted]/a", []string{"x://[redacted]/a"}, "x://[redacted]/a"},
	} {
		if got := red.unredact(tc.given, tc.originals); got != tc.want {
			t.Errorf("unredact(%q, %q) = %q, want %q", tc.given, tc.originals, got, tc.want)
		}
	}
}
