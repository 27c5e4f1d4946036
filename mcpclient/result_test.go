package mcpclient

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestResultText(t *testing.T) {
	size := int64(3)
	long := strings.Repeat("é", maxResourceText) // 2 bytes a rune: cut inside one
	for _, tc := range []struct {
		name  string
		res   *mcp.CallToolResult
		want  string
		isErr bool
	}{
		{"nil", nil, "", false},
		{"text", mcp.NewToolResultText("hello"), "hello", false},
		{"texts", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a"), mcp.NewTextContent("b")}}, "a\nb", false},
		{"image", mcp.NewToolResultImage("a cat", "iVBORw0KGgo=", "image/png"), "a cat\n[image captured, mimeType=image/png]", false},
		{"image pointer", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Type: "image", Data: "AAAA"}}}, "[image captured, mimeType=unknown]", false},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent("UklGR", "audio/wav")}}, "[audio captured, mimeType=audio/wav]", false},
		{"link", &mcp.CallToolResult{Content: []mcp.Content{mcp.ResourceLink{Type: "resource_link", URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "notes", Size: &size}}},
			"[resource link: file:///a.txt (a.txt), mimeType=text/plain: notes]", false},
		{"embedded text", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://note", Text: "remember"})}},
			"[resource mem://note]\nremember", false},
		{"embedded blob", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: "mem://bin", MIMEType: "application/zip", Blob: "AAECAwQ="})}},
			"[resource mem://bin, mimeType=application/zip, 5 bytes]", false},
		{"error", mcp.NewToolResultError("no such file"), "no such file", true},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"temp": 21}}, `{"temp":21}`, false},
		{"structured beside text", &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("21 C")}, StructuredContent: map[string]any{"temp": 21}}, "21 C", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, isErr := resultText(tc.res, redactor{})
			if got != tc.want || isErr != tc.isErr {
				t.Errorf("got %q, %v; want %q, %v", got, isErr, tc.want, tc.isErr)
			}
		})
	}

	got, _ := resultText(&mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://long", Text: long})}}, redactor{})
	if !strings.HasPrefix(got, "[resource mem://long]\n") || !strings.HasSuffix(got, " more bytes]") || len(got) > maxResourceText+100 {
		t.Errorf("a long resource: %d bytes ending %q", len(got), got[len(got)-30:])
	}
	if !strings.Contains(got, "é\n[…") {
		t.Error("a long resource was cut inside a character")
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]any
		want   string
	}{
		{map[string]any{"progress": 1, "total": 4}, "step 1/4"},
		{map[string]any{"progress": float64(2), "total": float64(4)}, "step 2/4"},
		{map[string]any{"progress": 0.5}, "step 0.5"},
		{map[string]any{"progress": int64(3), "total": 10, "message": "copied a.txt"}, "copied a.txt"},
		{map[string]any{"progress": 3, "message": ""}, "step 3"},
	} {
		if got := progressLine(tc.fields); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.fields, got, tc.want)
		}
	}
	if progressToken(float64(7)) != "7" || progressToken("t-1") != "t-1" || progressToken(nil) != "" {
		t.Error("progressToken")
	}
}
