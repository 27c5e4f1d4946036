package mcpclient

import (
	"slices"
	"strings"
	"testing"

	"github.com/planround/planround/internal/leaktest"
)

// Through the client, over stdio and streamable HTTP, the reference server's
// resources, templates and prompts are listed and read: a static document,
// a text and a binary resource from its templates, and a prompt with and
// one without arguments.
func TestEverythingResources(t *testing.T) {
	for _, tr := range []Transport{TransportStdio, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t, closeIdleHTTP)
			c := newClient(t, Options{}, everythingConfig(t, tr))
			ctx := bounded(t)

			res, err := c.ListResources(ctx, "", "everything")
			if err != nil {
				t.Fatal(err)
			}
			var doc *Resource
			for i, r := range res {
				if strings.HasPrefix(r.URI, "demo://resource/static/document/") && r.MIMEType == "text/markdown" {
					doc = &res[i]
					break
				}
			}
			if doc == nil {
				t.Fatalf("no static markdown document among %+v", res)
			}
			got, err := c.ReadResource(ctx, "", "everything", doc.URI)
			if err != nil || len(got) != 1 || got[0].URI != doc.URI || got[0].Text == "" {
				t.Errorf("read %s = %+v, %v", doc.URI, got, err)
			}

			tpls, err := c.ListResourceTemplates(ctx, "", "everything")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tp := range tpls {
				names = append(names, tp.URITemplate)
			}
			for _, want := range []string{"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"} {
				if !slices.Contains(names, want) {
					t.Errorf("templates = %v, want %s among them", names, want)
				}
			}
			got, err = c.ReadResource(ctx, "", "everything", "demo://resource/dynamic/text/7")
			if err != nil || len(got) != 1 || !strings.HasPrefix(got[0].Text, "Resource 7: ") {
				t.Errorf("read text/7 = %+v, %v", got, err)
			}
			got, err = c.ReadResource(ctx, "", "everything", "demo://resource/dynamic/blob/7")
			if err != nil || len(got) != 1 || len(got[0].Blob) == 0 || got[0].Text != "" {
				t.Errorf("read blob/7 = %+v, %v", got, err)
			}

			prompts, err := c.ListPrompts(ctx, "", "everything")
			if err != nil {
				t.Fatal(err)
			}
			var args *Prompt
			names = names[:0]
			for i, p := range prompts {
				names = append(names, p.Name)
				if p.Name == "args-prompt" {
					args = &prompts[i]
				}
			}
			if !slices.Contains(names, "simple-prompt") || args == nil {
				t.Fatalf("prompts = %v, want simple-prompt and args-prompt among them", names)
			}
			pr, err := c.GetPrompt(ctx, "", "everything", "simple-prompt", nil)
			if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Role != "user" || pr.Messages[0].Text != "This is a simple prompt without arguments." {
				t.Errorf("simple-prompt = %+v, %v", pr, err)
			}
			if len(args.Arguments) == 0 || !args.Arguments[0].Required {
				t.Errorf("args-prompt arguments = %+v, want a required first one", args.Arguments)
			}
			pr, err = c.GetPrompt(ctx, "", "everything", "args-prompt", map[string]string{args.Arguments[0].Name: "Paris"})
			if err != nil || len(pr.Messages) == 0 || !strings.Contains(pr.Messages[0].Text, "Paris") {
				t.Errorf("args-prompt = %+v, %v", pr, err)
			}
		})
	}
}
