package mcpclient

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The errors of the resource and prompt methods, to branch on with
// [errors.Is].
var (
	// ErrUnknownServer: no server of the Client has that name.
	ErrUnknownServer = errors.New("mcpclient: unknown server")
	// ErrUnsupported: the server did not declare the capability (resources
	// or prompts) in its handshake.
	ErrUnsupported = errors.New("mcpclient: not supported by the server")
	// ErrTooLarge: what the server sent is beyond the bounds of
	// [MaxResourceText], [MaxResourceBlob] or [MaxListItems], or a list
	// has more than 100 pages.
	ErrTooLarge = errors.New("mcpclient: too large")
)

// The bounds of what the resource and prompt methods take from a server.
const (
	// MaxResourceText bounds the text of one read or prompt, all of its
	// parts together: 1 MiB.
	MaxResourceText = 1 << 20
	// MaxResourceBlob bounds the binary data of one read or prompt, all of
	// its parts together, decoded: 4 MiB.
	MaxResourceBlob = 4 << 20
	// MaxListItems bounds the entries of one list, all pages together.
	MaxListItems = 10_000
	// maxListPages bounds the pages of one list.
	maxListPages = 100
)

// Resource is a resource a server lists. Its texts (URI, names,
// description, MIME type) have the server's secrets redacted, as every
// text of the types below.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	// Size is the size of its content in bytes as the server gives it; -1
	// when the server does not say.
	Size int64 `json:"size"`
}

// ResourceTemplate is a template of resource URIs (RFC 6570) a server
// lists: filled in, it names a resource to read.
type ResourceTemplate struct {
	URITemplate string `json:"uri_template"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// ResourceContent is one part of what reading a resource gave: a text or
// binary data.
type ResourceContent struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mime_type,omitempty"`
	// Text is the content of a text part, with the server's secrets
	// redacted.
	Text string `json:"text,omitempty"`
	// Blob is the content of a binary part, decoded; nil for a text part.
	Blob []byte `json:"blob,omitempty"`
}

// Prompt is a prompt (template) a server lists.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
}

// PromptArgument is an argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptResult is a prompt a server rendered with arguments.
type PromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
}

// PromptMessage is one message of a rendered prompt: a text, an image or
// sound, or an embedded resource.
type PromptMessage struct {
	// Role is "user" or "assistant".
	Role string `json:"role"`
	// Text is the text of a text message or of an embedded text resource,
	// with the server's secrets redacted.
	Text string `json:"text,omitempty"`
	// Blob is the data of an image, a sound or an embedded binary
	// resource, decoded.
	Blob     []byte `json:"blob,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	// URI is the URI of an embedded resource.
	URI string `json:"uri,omitempty"`
}

// ListResources returns the resources the server lists (all pages, up to
// [MaxListItems]). The session id names the conversation whose instance
// of a per_conversation server answers (it starts one when the
// conversation has none); shared servers ignore it.
//
// It fails with [ErrUnknownServer], [ErrUnsupported] when the server
// declared no resources, [ErrTooLarge], or the server's error (its
// secrets redacted).
func (c *Client) ListResources(ctx context.Context, sessionID, server string) ([]Resource, error) {
	return request(ctx, c, sessionID, server, capResources, func(ctx context.Context, cn *conn) ([]Resource, error) {
		list, err := listResources(ctx, cn)
		if err != nil {
			return nil, err
		}
		red := cn.e.red
		out := make([]Resource, 0, len(list))
		for _, r := range list {
			size := int64(-1)
			if r.Size != nil {
				size = *r.Size
			}
			out = append(out, Resource{URI: red.String(r.URI), Name: red.String(r.Name), Title: red.String(r.Title),
				Description: red.String(r.Description), MIMEType: red.String(r.MIMEType), Size: size})
		}
		return out, nil
	})
}

// listResources returns the resources the server of cn lists, as it
// wrote them.
func listResources(ctx context.Context, cn *conn) ([]mcp.Resource, error) {
	var out []mcp.Resource
	err := pages(ctx, func(ctx context.Context, cursor mcp.Cursor) (mcp.Cursor, error) {
		var req mcp.ListResourcesRequest
		req.Params.Cursor = cursor
		res, err := cn.mc.ListResourcesByPage(ctx, req)
		if err != nil {
			return "", err
		}
		out = append(out, res.Resources...)
		return res.NextCursor, tooMany(len(out))
	})
	return out, err
}

// ListResourceTemplates returns the resource templates the server lists,
// as [Client.ListResources] does its resources.
func (c *Client) ListResourceTemplates(ctx context.Context, sessionID, server string) ([]ResourceTemplate, error) {
	return request(ctx, c, sessionID, server, capResources, func(ctx context.Context, cn *conn) ([]ResourceTemplate, error) {
		var out []ResourceTemplate
		err := pages(ctx, func(ctx context.Context, cursor mcp.Cursor) (mcp.Cursor, error) {
			var req mcp.ListResourceTemplatesRequest
			req.Params.Cursor = cursor
			res, err := cn.mc.ListResourceTemplatesByPage(ctx, req)
			if err != nil {
				return "", err
			}
			red := cn.e.red
			for _, r := range res.ResourceTemplates {
				t := ResourceTemplate{Name: red.String(r.Name), Title: red.String(r.Title), Description: red.String(r.Description), MIMEType: red.String(r.MIMEType)}
				if r.URITemplate != nil && r.URITemplate.Template != nil {
					t.URITemplate = red.String(r.URITemplate.Raw())
				}
				out = append(out, t)
			}
			return res.NextCursor, tooMany(len(out))
		})
		return out, err
	})
}

// ReadResource reads the resource with that URI (one the server listed, or
// one filled in from a template). Its text is bounded by
// [MaxResourceText] and its binary data by [MaxResourceBlob]: beyond, it
// fails with [ErrTooLarge]. Otherwise it fails as [Client.ListResources]
// does.
//
// A URI that holds a secret of the server's configuration is listed with
// the secret redacted; read with that URI as listed, the resource the
// server listed under it is read.
func (c *Client) ReadResource(ctx context.Context, sessionID, server, uri string) ([]ResourceContent, error) {
	return request(ctx, c, sessionID, server, capResources, func(ctx context.Context, cn *conn) ([]ResourceContent, error) {
		if cn.e.red.secretSet != nil && strings.Contains(uri, redacted) {
			list, err := listResources(ctx, cn)
			if err != nil {
				return nil, err
			}
			uris := make([]string, len(list))
			for i, r := range list {
				uris[i] = r.URI
			}
			uri = cn.e.red.unredact(uri, uris)
		}
		var req mcp.ReadResourceRequest
		req.Params.URI = uri
		res, err := cn.mc.ReadResource(ctx, req)
		if err != nil {
			return nil, err
		}
		return resourceContents(res, cn.e.red)
	})
}

// resourceContents converts what a read gave, within the bounds.
func resourceContents(res *mcp.ReadResourceResult, red redactor) ([]ResourceContent, error) {
	var b bounds
	out := make([]ResourceContent, 0, len(res.Contents))
	for _, rc := range res.Contents {
		if t, ok := mcp.AsTextResourceContents(rc); ok {
			if err := b.text(len(t.Text)); err != nil {
				return nil, err
			}
			out = append(out, ResourceContent{URI: red.String(t.URI), MIMEType: red.String(t.MIMEType), Text: red.String(t.Text)})
		} else if bl, ok := mcp.AsBlobResourceContents(rc); ok {
			data, err := b.blob(bl.Blob)
			if err != nil {
				return nil, err
			}
			out = append(out, ResourceContent{URI: red.String(bl.URI), MIMEType: red.String(bl.MIMEType), Blob: data})
		}
	}
	return out, nil
}

// ListPrompts returns the prompts the server lists, as
// [Client.ListResources] does its resources; a server that declared no
// prompts fails with [ErrUnsupported].
func (c *Client) ListPrompts(ctx context.Context, sessionID, server string) ([]Prompt, error) {
	return request(ctx, c, sessionID, server, capPrompts, func(ctx context.Context, cn *conn) ([]Prompt, error) {
		list, err := listPrompts(ctx, cn)
		if err != nil {
			return nil, err
		}
		red := cn.e.red
		out := make([]Prompt, 0, len(list))
		for _, p := range list {
			pr := Prompt{Name: red.String(p.Name), Title: red.String(p.Title), Description: red.String(p.Description)}
			for _, a := range p.Arguments {
				pr.Arguments = append(pr.Arguments, PromptArgument{Name: red.String(a.Name), Title: red.String(a.Title),
					Description: red.String(a.Description), Required: a.Required})
			}
			out = append(out, pr)
		}
		return out, nil
	})
}

// listPrompts returns the prompts the server of cn lists, as it wrote
// them.
func listPrompts(ctx context.Context, cn *conn) ([]mcp.Prompt, error) {
	var out []mcp.Prompt
	err := pages(ctx, func(ctx context.Context, cursor mcp.Cursor) (mcp.Cursor, error) {
		var req mcp.ListPromptsRequest
		req.Params.Cursor = cursor
		res, err := cn.mc.ListPromptsByPage(ctx, req)
		if err != nil {
			return "", err
		}
		out = append(out, res.Prompts...)
		return res.NextCursor, tooMany(len(out))
	})
	return out, err
}

// GetPrompt renders the prompt with that name and arguments. Its texts
// and data are bounded as [Client.ReadResource]'s are, and it fails as
// [Client.ListPrompts] does. A name or an argument's name that holds a
// secret of the server's configuration is listed redacted, and may be
// given as listed, as a URI to ReadResource.
func (c *Client) GetPrompt(ctx context.Context, sessionID, server, name string, args map[string]string) (*PromptResult, error) {
	return request(ctx, c, sessionID, server, capPrompts, func(ctx context.Context, cn *conn) (*PromptResult, error) {
		if red := cn.e.red; red.secretSet != nil && promptRedacted(name, args) {
			list, err := listPrompts(ctx, cn)
			if err != nil {
				return nil, err
			}
			names := make([]string, len(list))
			for i, p := range list {
				names[i] = p.Name
			}
			name = red.unredact(name, names)
			for _, p := range list {
				if p.Name != name {
					continue
				}
				renamed := make(map[string]string, len(args))
				for k, v := range args {
					renamed[k] = v
				}
				for _, a := range p.Arguments {
					if ra := red.String(a.Name); ra != a.Name {
						if v, ok := args[ra]; ok {
							delete(renamed, ra)
							renamed[a.Name] = v
						}
					}
				}
				args = renamed
				break
			}
		}
		var req mcp.GetPromptRequest
		req.Params.Name = name
		req.Params.Arguments = args
		res, err := cn.mc.GetPrompt(ctx, req)
		if err != nil {
			return nil, err
		}
		return promptResult(res, cn.e.red)
	})
}

// promptResult converts a rendered prompt, within the bounds.
func promptResult(res *mcp.GetPromptResult, red redactor) (*PromptResult, error) {
	var b bounds
	if err := b.text(len(res.Description)); err != nil {
		return nil, err
	}
	out := &PromptResult{Description: red.String(res.Description), Messages: make([]PromptMessage, 0, len(res.Messages))}
	for _, m := range res.Messages {
		pm := PromptMessage{Role: red.String(string(m.Role))}
		var err error
		if t, ok := mcp.AsTextContent(m.Content); ok {
			err = b.text(len(t.Text))
			pm.Text = red.String(t.Text)
		} else if im, ok := mcp.AsImageContent(m.Content); ok {
			pm.MIMEType = im.MIMEType
			pm.Blob, err = b.blob(im.Data)
		} else if au, ok := mcp.AsAudioContent(m.Content); ok {
			pm.MIMEType = au.MIMEType
			pm.Blob, err = b.blob(au.Data)
		} else if er, ok := mcp.AsEmbeddedResource(m.Content); ok {
			if t, ok := mcp.AsTextResourceContents(er.Resource); ok {
				pm.URI, pm.MIMEType = t.URI, t.MIMEType
				err = b.text(len(t.Text))
				pm.Text = red.String(t.Text)
			} else if bl, ok := mcp.AsBlobResourceContents(er.Resource); ok {
				pm.URI, pm.MIMEType = bl.URI, bl.MIMEType
				pm.Blob, err = b.blob(bl.Blob)
			}
		}
		if err != nil {
			return nil, err
		}
		pm.URI, pm.MIMEType = red.String(pm.URI), red.String(pm.MIMEType)
		out.Messages = append(out.Messages, pm)
	}
	return out, nil
}

// promptRedacted reports whether a prompt's name or an argument's name
// holds a redacted secret.
func promptRedacted(name string, args map[string]string) bool {
	if strings.Contains(name, redacted) {
		return true
	}
	for k := range args {
		if strings.Contains(k, redacted) {
			return true
		}
	}
	return false
}

// bounds counts the text and data of one answer against MaxResourceText
// and MaxResourceBlob.
type bounds struct{ text0, blob0 int }

func (b *bounds) text(n int) error {
	b.text0 += n
	if b.text0 > MaxResourceText {
		return fmt.Errorf("%w: more than %d KiB of text", ErrTooLarge, MaxResourceText>>10)
	}
	return nil
}

// blob decodes base64 data, counting it.
func (b *bounds) blob(s string) ([]byte, error) {
	if b.blob0+base64.StdEncoding.DecodedLen(len(s)) > MaxResourceBlob+2 {
		return nil, fmt.Errorf("%w: more than %d KiB of binary data", ErrTooLarge, MaxResourceBlob>>10)
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("binary data that is not base64: %w", err)
	}
	b.blob0 += len(data)
	if b.blob0 > MaxResourceBlob {
		return nil, fmt.Errorf("%w: more than %d KiB of binary data", ErrTooLarge, MaxResourceBlob>>10)
	}
	return data, nil
}

func tooMany(n int) error {
	if n > MaxListItems {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxListItems)
	}
	return nil
}

// pages calls page with each cursor, the empty one first, until it returns
// no next cursor; at most maxListPages times, and never twice with a
// cursor.
func pages(ctx context.Context, page func(ctx context.Context, cursor mcp.Cursor) (mcp.Cursor, error)) error {
	seen := make(map[mcp.Cursor]bool)
	var cursor mcp.Cursor
	for range maxListPages {
		next, err := page(ctx, cursor)
		if err != nil || next == "" {
			return err
		}
		if seen[next] {
			return fmt.Errorf("the server repeated the list cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
	return fmt.Errorf("%w: more than %d pages", ErrTooLarge, maxListPages)
}

// capability is what a server declared that a method needs.
type capability int

const (
	capResources capability = iota
	capPrompts
)

// request runs f on the connection of server that serves the session,
// bounded by the server's call timeout, with its errors redacted.
func request[T any](ctx context.Context, c *Client, sessionID, server string, need capability, f func(context.Context, *conn) (T, error)) (T, error) {
	var zero T
	e := c.entry(server)
	if e == nil {
		return zero, fmt.Errorf("%w %q", ErrUnknownServer, server)
	}
	if d := e.cfg.callTimeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, callTimeoutError(d))
		defer cancel()
	}
	out, err := e.request(ctx, sessionID, func(ctx context.Context, cn *conn) (any, error) {
		caps := cn.caps
		if (need == capResources && caps.Resources == nil) || (need == capPrompts && caps.Prompts == nil) {
			what := "resources"
			if need == capPrompts {
				what = "prompts"
			}
			return nil, fmt.Errorf("%w: the server declared no %s", ErrUnsupported, what)
		}
		return f(ctx, cn)
	})
	if err != nil {
		return zero, e.wrap(err)
	}
	return out.(T), nil
}

// entry is the server named name, or nil.
func (c *Client) entry(name string) *serverEntry {
	for _, e := range c.entries {
		if e.cfg.Name == name {
			return e
		}
	}
	return nil
}

// request runs f on the connection that serves the session: a shared
// server's, or the session's instance of a per_conversation server. Like a
// tool call, it is made once more on a fresh connection when the one it
// found had died unnoticed.
func (e *serverEntry) request(ctx context.Context, sessionID string, f func(context.Context, *conn) (any, error)) (any, error) {
	if e.shared != nil {
		cn, err := e.shared.connect(ctx)
		if err != nil {
			return nil, err
		}
		out, err := cn.do(ctx, f)
		if errors.Is(err, errNotSent) {
			if cn, err = e.shared.connect(ctx); err != nil {
				return nil, err
			}
			out, err = cn.do(ctx, f)
		}
		return out, err
	}
	if sessionID == "" {
		return nil, errors.New("this server runs one instance per conversation, and no session id was given")
	}
	for attempt := 0; ; attempt++ {
		inst, release, err := e.sb.get(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		cn, ok := inst.(*conn)
		if !ok {
			release()
			return nil, errors.New("the server's instance does not take requests")
		}
		out, err := cn.do(ctx, f)
		release()
		if errors.Is(err, errLost) && !errors.Is(err, errClosed) {
			e.sb.discard(sessionID, inst)
		}
		if attempt == 0 && errors.Is(err, errNotSent) {
			continue
		}
		return out, err
	}
}

// do runs f, a request other than a tool call, as call runs a call: on a
// caller of c, returning when ctx ends or the connection is lost, whatever
// the transport does.
func (c *conn) do(ctx context.Context, f func(context.Context, *conn) (any, error)) (any, error) {
	c.mu.Lock()
	if c.closing || c.isLost() {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", errNotSent, c.lostError())
	}
	c.calls.Add(1)
	c.mu.Unlock()
	type reply struct {
		v   any
		err error
	}
	callCtx, stop := context.WithCancel(noDeadline{ctx})
	done := make(chan reply, 1)
	c.runCall(func() {
		defer c.calls.Done()
		defer stop()
		v, err := f(callCtx, c)
		done <- reply{v, err}
	})
	result := func(r reply) (any, error) {
		if r.err != nil {
			if errors.Is(r.err, ErrUnsupported) || errors.Is(r.err, ErrTooLarge) {
				return nil, r.err
			}
			return nil, c.callError(ctx, r.err)
		}
		return r.v, nil
	}
	select {
	case r := <-done:
		return result(r)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-c.lost:
		select {
		case r := <-done:
			return result(r)
		case <-time.After(replyGrace):
			return nil, c.lostError()
		}
	}
}
