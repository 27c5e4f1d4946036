package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planround/planround/internal/schemas"
)

// maxResourceText bounds the text of an embedded resource that a result
// passes on to the model.
const maxResourceText = 4096

// resultText is the text the model reads for a tool's result, and whether
// the result is an error.
//
// Text passes through. Images and audio become a placeholder naming their
// type, so that base64 does not flood the context; a resource link becomes
// a line naming it; an embedded resource its text (bounded) or, for a blob,
// a line naming it. The parts are joined by newlines. A result without any
// of these gives its structured content as JSON.
//
// The caller redacts the text; red is for what that cannot see: a secret
// cut by the bound of an embedded resource's text (the cut goes before
// it), and one escaped in the structured content's JSON.
func resultText(res *mcp.CallToolResult, red redactor) (string, bool) {
	if res == nil {
		return "", false
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		if s := contentText(c, red); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		switch {
		case len(res.RawStructuredContent) > 0 && string(res.RawStructuredContent) != "null":
			parts = append(parts, string(red.jsonStrings(res.RawStructuredContent)))
		case res.StructuredContent != nil:
			if b, err := json.Marshal(res.StructuredContent); err == nil {
				parts = append(parts, string(red.jsonStrings(b)))
			}
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

func contentText(c mcp.Content, red redactor) string {
	switch v := c.(type) {
	case mcp.TextContent:
		return v.Text
	case *mcp.TextContent:
		return v.Text
	case mcp.ImageContent:
		return placeholder("image", v.MIMEType)
	case *mcp.ImageContent:
		return placeholder("image", v.MIMEType)
	case mcp.AudioContent:
		return placeholder("audio", v.MIMEType)
	case *mcp.AudioContent:
		return placeholder("audio", v.MIMEType)
	case mcp.ResourceLink:
		return linkText(v)
	case *mcp.ResourceLink:
		return linkText(*v)
	case mcp.EmbeddedResource:
		return resourceText(v.Resource, red)
	case *mcp.EmbeddedResource:
		return resourceText(v.Resource, red)
	}
	return ""
}

// placeholder stands for binary content the model cannot read:
// "[image captured, mimeType=image/png]".
func placeholder(kind, mimeType string) string {
	if mimeType == "" {
		mimeType = "unknown"
	}
	return fmt.Sprintf("[%s captured, mimeType=%s]", kind, mimeType)
}

func linkText(l mcp.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	b.WriteString(l.URI)
	if l.Name != "" && l.Name != l.URI {
		fmt.Fprintf(&b, " (%s)", l.Name)
	}
	if l.MIMEType != "" {
		b.WriteString(", mimeType=" + l.MIMEType)
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func resourceText(r mcp.ResourceContents, red redactor) string {
	switch v := r.(type) {
	case mcp.TextResourceContents:
		return textResource(v, red)
	case *mcp.TextResourceContents:
		return textResource(*v, red)
	case mcp.BlobResourceContents:
		return blobResource(v)
	case *mcp.BlobResourceContents:
		return blobResource(*v)
	}
	return ""
}

func textResource(v mcp.TextResourceContents, red redactor) string {
	text := v.Text
	if len(text) > maxResourceText {
		// Not in a secret, which would show its first part.
		cut := red.settled(text[:maxResourceText])
		for cut > 0 && !isRuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[… %d more bytes]", len(v.Text)-cut)
	}
	return fmt.Sprintf("[resource %s]\n%s", v.URI, text)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func blobResource(v mcp.BlobResourceContents) string {
	mimeType := v.MIMEType
	if mimeType == "" {
		mimeType = "unknown"
	}
	size := len(strings.TrimRight(strings.TrimSpace(v.Blob), "=")) * 3 / 4 // base64
	return fmt.Sprintf("[resource %s, mimeType=%s, %d bytes]", v.URI, mimeType, size)
}

// compileOutput compiles a tool's output schema for checking its
// structured results. No reference is loaded from anywhere.
func compileOutput(schema mcp.ToolOutputSchema) (*jsonschema.Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	return schemas.Compile(b, "urn:planround:tool-output")
}

// maxSchemaError bounds the text of a structured result's schema error
// that the model reads.
const maxSchemaError = 500

// structuredText is what the model reads for a successful result of a tool
// that declares an output schema s: its structured content as JSON (the
// text content, which the specification asks servers to make a copy of
// it, is left out). A result without structured content, or with one that
// does not match s, is an error the model reads.
func structuredText(tool string, s *jsonschema.Schema, res *mcp.CallToolResult, red redactor) (string, error) {
	raw := res.RawStructuredContent
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		raw = nil
		if res.StructuredContent != nil {
			raw, _ = json.Marshal(res.StructuredContent)
		}
	}
	if raw == nil {
		return "", toolError(fmt.Sprintf("the tool %s declares an output schema but its result has no structured content", tool))
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err == nil {
		err = s.Validate(v)
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > maxSchemaError {
			cut := maxSchemaError
			for cut > 0 && !isRuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
		return "", toolError(fmt.Sprintf("the structured result of %s does not match its output schema: %s", tool, msg))
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) == nil {
		raw = compact.Bytes()
	}
	return string(red.jsonStrings(raw)), nil
}
