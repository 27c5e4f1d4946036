package testserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ContentOptions configure a server of [NewContent].
type ContentOptions struct {
	// PageSize lists resources, templates and prompts that many to a page;
	// 0 lists them on one.
	PageSize int
	// BigBytes is the size of the text of mcptest://big.txt; 0 means
	// 2 MiB.
	BigBytes int
	// Getenv reads the variables of mcptest://env/{name}; nil means
	// os.Getenv.
	Getenv func(string) string
}

// ContentResources are the URIs of the resources a server of [NewContent]
// lists, in its order (sorted by name, the last part of the URI):
//
//   - mcptest://notes/a.txt: "note a" (text/plain).
//   - mcptest://notes/b.md: "# note b" (text/markdown).
//   - mcptest://big.txt: [ContentOptions.BigBytes] bytes of "x".
//   - mcptest://data/blob.bin: the bytes 0, 1, 2, 255 (application/octet-stream).
//   - mcptest://notes/c.txt: "note c" (text/plain).
//   - mcptest://images/dot.png: a 1×1 PNG image (image/png).
//
// Its one template is mcptest://env/{name}: the value of the environment
// variable name.
//
// Its prompts are greet {name (required)}: a user message "Hello, <name>!"
// and an assistant message "Hi! How can I help?"; and attach: a user
// message embedding mcptest://notes/a.txt.
var ContentResources = []string{
	"mcptest://notes/a.txt", "mcptest://notes/b.md", "mcptest://big.txt",
	"mcptest://data/blob.bin", "mcptest://notes/c.txt", "mcptest://images/dot.png",
}

// NewContent returns a server with resources, a resource template and
// prompts (listed above), and no tools: it does not declare the tools
// capability.
func NewContent(o ContentOptions) *server.MCPServer {
	opts := []server.ServerOption{
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithRecovery(),
	}
	if o.PageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(o.PageSize))
	}
	if o.BigBytes <= 0 {
		o.BigBytes = 2 << 20
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	srv := server.NewMCPServer("mcptest-content", "1.0.0", opts...)
	text := func(uri, mime, body string) {
		srv.AddResource(mcp.NewResource(uri, uri[strings.LastIndexByte(uri, '/')+1:], mcp.WithMIMEType(mime), mcp.WithResourceDescription("a test resource")),
			func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: body}}, nil
			})
	}
	blob := func(uri, mime, b64 string) {
		srv.AddResource(mcp.NewResource(uri, uri[strings.LastIndexByte(uri, '/')+1:], mcp.WithMIMEType(mime)),
			func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mime, Blob: b64}}, nil
			})
	}
	text("mcptest://notes/a.txt", "text/plain", "note a")
	text("mcptest://notes/b.md", "text/markdown", "# note b")
	text("mcptest://notes/c.txt", "text/plain", "note c")
	blob("mcptest://data/blob.bin", "application/octet-stream", base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}))
	blob("mcptest://images/dot.png", "image/png", tinyPNG)
	text("mcptest://big.txt", "text/plain", strings.Repeat("x", o.BigBytes))

	srv.AddResourceTemplate(mcp.NewResourceTemplate("mcptest://env/{name}", "env", mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			name := strings.TrimPrefix(req.Params.URI, "mcptest://env/")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: o.Getenv(name)}}, nil
		})

	srv.AddPrompt(mcp.NewPrompt("greet", mcp.WithPromptDescription("Greets someone."),
		mcp.WithArgument("name", mcp.RequiredArgument(), mcp.ArgumentDescription("who to greet"))),
		func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			name := req.Params.Arguments["name"]
			if name == "" {
				return nil, fmt.Errorf("greet needs a name")
			}
			return mcp.NewGetPromptResult("a greeting", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Hello, "+name+"!")),
				mcp.NewPromptMessage(mcp.RoleAssistant, mcp.NewTextContent("Hi! How can I help?")),
			}), nil
		})
	srv.AddPrompt(mcp.NewPrompt("attach", mcp.WithPromptDescription("Embeds a note.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mcptest://notes/a.txt", MIMEType: "text/plain", Text: "note a"})),
			}), nil
		})
	return srv
}
