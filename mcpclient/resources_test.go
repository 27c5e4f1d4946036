package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient/internal/mcptest/testserver"
)

// resSecret is the secret the content servers of these tests give away in
// mcptest://env/RES_SECRET.
const resSecret = "res-s3cret-9f8e7d"

// contentConfig is a content server (testserver.NewContent) on the
// transport, listing two to a page, whose configuration holds resSecret as
// a secret. Over HTTP it serves in the test's process.
func contentConfig(t *testing.T, tr Transport, name string) ServerConfig {
	t.Helper()
	t.Setenv("PLANROUND_RES_SECRET", resSecret)
	switch tr {
	case TransportStdio:
		cfg := stdioConfig(t, name, "-mode=content")
		cfg.Env = map[string]string{"RES_SECRET": "${PLANROUND_RES_SECRET}"}
		return cfg
	case TransportHTTP:
		srv := testserver.NewContent(testserver.ContentOptions{PageSize: 2, Getenv: func(n string) string {
			if n == "RES_SECRET" {
				return resSecret
			}
			return ""
		}})
		ts := servertest.NewTestStreamableHTTPServer(srv)
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		return ServerConfig{Name: name, Transport: tr, URL: ts.URL + "/mcp", StartTimeout: 10 * time.Second,
			Headers: map[string]string{"Authorization": "Bearer ${PLANROUND_RES_SECRET}"}}
	}
	t.Fatalf("no content server over %q", tr)
	return ServerConfig{}
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Over stdio and streamable HTTP: a server without tools starts and offers
// none; its resources, templates and prompts are listed over all pages;
// text and binary resources are read, a template filled in, prompts
// rendered; a secret in a resource is redacted; a resource beyond the
// bound fails with ErrTooLarge; an unknown server and a server without the
// capability fail with their errors.
func TestResourcesAndPrompts(t *testing.T) {
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			tools := newFixture(t, tr)
			tools.cfg.Name = "tools"
			c := newClient(t, Options{}, contentConfig(t, tr, "content"), tools.cfg)
			ctx := bounded(t)

			for _, tl := range c.Tools() {
				if strings.HasPrefix(tl.Definition().Name, "content") {
					t.Errorf("tool %q of a server that declared no tools", tl.Definition().Name)
				}
			}
			if st := c.Servers()[0]; st.State != StateConnected || len(st.Tools) != 0 {
				t.Errorf("content server status = %+v, want connected without tools", st)
			}

			res, err := c.ListResources(ctx, "", "content")
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range res {
				uris = append(uris, r.URI)
			}
			if !slices.Equal(uris, testserver.ContentResources) {
				t.Errorf("resources = %v, want %v (all pages)", uris, testserver.ContentResources)
			}
			if r := res[0]; r.Name != "a.txt" || r.MIMEType != "text/plain" || r.Description != "a test resource" || r.Size != -1 {
				t.Errorf("first resource = %+v", r)
			}

			tpls, err := c.ListResourceTemplates(ctx, "", "content")
			if err != nil || len(tpls) != 1 || tpls[0].URITemplate != "mcptest://env/{name}" || tpls[0].Name != "env" {
				t.Errorf("templates = %+v, %v", tpls, err)
			}

			got, err := c.ReadResource(ctx, "", "content", "mcptest://notes/b.md")
			if err != nil || len(got) != 1 || got[0].Text != "# note b" || got[0].MIMEType != "text/markdown" || got[0].Blob != nil {
				t.Errorf("read b.md = %+v, %v", got, err)
			}
			got, err = c.ReadResource(ctx, "", "content", "mcptest://data/blob.bin")
			if err != nil || len(got) != 1 || !bytes.Equal(got[0].Blob, []byte{0, 1, 2, 255}) || got[0].Text != "" {
				t.Errorf("read blob.bin = %+v, %v", got, err)
			}
			got, err = c.ReadResource(ctx, "", "content", "mcptest://env/RES_SECRET")
			if err != nil || len(got) != 1 || got[0].Text != "[redacted]" {
				t.Errorf("read the secret = %+v, %v; want it redacted", got, err)
			}
			if _, err = c.ReadResource(ctx, "", "content", "mcptest://big.txt"); !errors.Is(err, ErrTooLarge) {
				t.Errorf("read big.txt: err = %v, want ErrTooLarge", err)
			}
			_, err = c.ReadResource(ctx, "", "content", "mcptest://nowhere/"+resSecret)
			if err == nil || strings.Contains(err.Error(), resSecret) || !strings.Contains(err.Error(), `"content"`) {
				t.Errorf("read a missing resource: err = %v, want the server's error, redacted", err)
			}

			prompts, err := c.ListPrompts(ctx, "", "content")
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
			want := []Prompt{
				{Name: "attach", Description: "Embeds a note."},
				{Name: "greet", Description: "Greets someone.", Arguments: []PromptArgument{{Name: "name", Description: "who to greet", Required: true}}},
			}
			if !equalJSON(prompts, want) {
				t.Errorf("prompts = %+v, want %+v", prompts, want)
			}
			pr, err := c.GetPrompt(ctx, "", "content", "greet", map[string]string{"name": "Ada"})
			wantPR := &PromptResult{Description: "a greeting", Messages: []PromptMessage{
				{Role: "user", Text: "Hello, Ada!"}, {Role: "assistant", Text: "Hi! How can I help?"},
			}}
			if err != nil || !equalJSON(pr, wantPR) {
				t.Errorf("greet = %+v, %v; want %+v", pr, err, wantPR)
			}
			pr, err = c.GetPrompt(ctx, "", "content", "attach", nil)
			if err != nil || len(pr.Messages) != 1 || pr.Messages[0].URI != "mcptest://notes/a.txt" || pr.Messages[0].Text != "note a" {
				t.Errorf("attach = %+v, %v", pr, err)
			}
			if _, err = c.GetPrompt(ctx, "", "content", "greet", nil); err == nil {
				t.Error("greet without its argument: no error")
			}

			if _, err = c.ListResources(ctx, "", "nope"); !errors.Is(err, ErrUnknownServer) {
				t.Errorf("unknown server: err = %v, want ErrUnknownServer", err)
			}
			if _, err = c.ListResources(ctx, "", "tools"); !errors.Is(err, ErrUnsupported) {
				t.Errorf("resources of a tools server: err = %v, want ErrUnsupported", err)
			}
			if _, err = c.ReadResource(ctx, "", "tools", "mcptest://notes/a.txt"); !errors.Is(err, ErrUnsupported) {
				t.Errorf("read from a tools server: err = %v, want ErrUnsupported", err)
			}
			if _, err = c.ListPrompts(ctx, "", "tools"); !errors.Is(err, ErrUnsupported) {
				t.Errorf("prompts of a tools server: err = %v, want ErrUnsupported", err)
			}
			// The tools server still works.
			if got, err := run(t, tool(t, c, "echo"), `{"text":"still here"}`, nil); err != nil || got != "still here" {
				t.Errorf("echo = %q, %v", got, err)
			}
		})
	}
}

// A per_conversation server answers each session from the session's own
// instance, started by the first request; without a session id it fails.
func TestResourcesPerConversation(t *testing.T) {
	leaktest.Check(t)
	cfg := contentConfig(t, TransportStdio, "content")
	cfg.Isolation = IsolationPerConversation
	c := newClient(t, Options{}, cfg)
	ctx := bounded(t)

	if _, err := c.ListResources(ctx, "", "content"); err == nil || !strings.Contains(err.Error(), "session") {
		t.Errorf("no session: err = %v, want one that asks for a session", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []string{"s1", "s2"} {
		wg.Go(func() {
			got, err := c.ReadResource(ctx, s, "content", "mcptest://notes/c.txt")
			if err == nil && (len(got) != 1 || got[0].Text != "note c") {
				err = errors.New("read " + s + ": unexpected content")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := c.Servers()[0].Instances; n != 2 {
		t.Errorf("instances = %d, want 2 (one per session)", n)
	}
	c.CloseConversation("s1")
	if n := c.Servers()[0].Instances; n != 1 {
		t.Errorf("instances after closing s1 = %d, want 1", n)
	}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// What a server sends for a read or a prompt is converted within the
// bounds, whatever it is: no panic, nothing beyond MaxResourceText and
// MaxResourceBlob.
func FuzzResourceResults(f *testing.F) {
	for _, s := range []string{
		`{"contents":[{"uri":"a://b","mimeType":"text/plain","text":"hi"}]}`,
		`{"contents":[{"uri":"a://b","blob":"AAEC/w=="},{"uri":"a://c","text":""}]}`,
		`{"contents":[{"uri":"a://b","blob":"not base64!"}]}`,
		`{"contents":[{"text":"no uri"}]}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"hello"}}]}`,
		`{"description":"d","messages":[{"role":"user","content":{"type":"image","data":"AAEC","mimeType":"image/png"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"a://b","text":"t"}}}]}`,
		`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"a://b","blob":"AA=="}}}]}`,
		`{"messages":[{"role":"user","content":{"type":"audio","data":"###","mimeType":"audio/wav"}}]}`,
	} {
		f.Add([]byte(s))
	}
	red := newRedactor([]string{"hi"})
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := json.RawMessage(data)
		if res, err := mcp.ParseReadResourceResult(&raw); err == nil {
			if out, err := resourceContents(res, red); err == nil {
				checkBounds(t, out)
			}
		}
		if res, err := mcp.ParseGetPromptResult(&raw); err == nil {
			if out, err := promptResult(res, red); err == nil {
				var parts []ResourceContent
				for _, m := range out.Messages {
					parts = append(parts, ResourceContent{Text: m.Text, Blob: m.Blob})
				}
				checkBounds(t, parts)
			}
		}
	})
}

func checkBounds(t *testing.T, parts []ResourceContent) {
	var text, blob int
	for _, p := range parts {
		text += len(p.Text)
		blob += len(p.Blob)
		if strings.Contains(p.Text, "hi") {
			t.Errorf("secret not redacted in %q", p.Text)
		}
	}
	// Redaction may grow a text: "[redacted]" is longer than the secret.
	if text > 5*MaxResourceText || blob > MaxResourceBlob {
		t.Errorf("%d bytes of text, %d of data: beyond the bounds", text, blob)
	}
}
