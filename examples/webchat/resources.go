package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
)

// The resources of the MCP servers: GET /api/mcp/resources lists them for
// the page's picker, and a message (POST /api/chat) may attach some, which
// the server reads and adds to the message the model gets.

const (
	// maxAttached bounds the resources one message attaches.
	maxAttached = 8
	// maxAttachedText bounds the text the resources of one message add to
	// it, all together (each read is bounded by mcpclient too).
	maxAttachedText = 1 << 20
	// resourceTimeout bounds listing the resources, and reading those of a
	// message.
	resourceTimeout = 20 * time.Second
)

// resourceRef names a resource a message attaches.
type resourceRef struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
}

// serverResources are the resources of one MCP server, as GET
// /api/mcp/resources shows them.
type serverResources struct {
	Server    string               `json:"server"`
	Resources []mcpclient.Resource `json:"resources"`
	// Error says why they could not be listed.
	Error string `json:"error,omitempty"`
}

// handleMCPResources answers GET /api/mcp/resources?session_id=… with the
// resources of the MCP servers that offer some, in the order of the
// configuration:
//
//	200 [{"server","resources":[{"uri","name","title"?,"description"?,"mime_type"?,"size"}],"error"?}]
//	400 a missing or malformed session id
//	401 no owner cookie
//	403 the session is another browser's
//
// A server that declared no resources is left out, and so is every server
// without MCP servers (an empty list). The session matters to
// per_conversation servers: their resources are those of the session's
// instance, which the listing starts when the session has none yet. Names
// come without format characters (dropFormat); an error holds no secret of
// the configuration (the MCP client redacts them).
func (s *Server) handleMCPResources(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	out := []serverResources{}
	if s.mcp != nil {
		ctx, cancel := context.WithTimeout(r.Context(), resourceTimeout)
		defer cancel()
		servers := s.mcp.Servers()
		lists := make([]serverResources, len(servers))
		skip := make([]bool, len(servers))
		var wg sync.WaitGroup
		for i, st := range servers {
			wg.Go(func() {
				res, err := s.mcp.ListResources(ctx, id, st.Name)
				lists[i] = serverResources{Server: dropFormat(st.Name), Resources: res}
				switch {
				case errors.Is(err, mcpclient.ErrUnsupported):
					skip[i] = true
				case err != nil:
					lists[i].Error = err.Error()
				}
				if lists[i].Resources == nil {
					lists[i].Resources = []mcpclient.Resource{}
				}
				for j := range lists[i].Resources {
					rs := &lists[i].Resources[j]
					rs.Name, rs.Title, rs.Description = dropFormat(rs.Name), dropFormat(rs.Title), dropFormat(rs.Description)
				}
			})
		}
		wg.Wait()
		for i, l := range lists {
			if !skip[i] {
				out = append(out, l)
			}
		}
	}
	writeJSONValue(w, http.StatusOK, out)
}

// attachError is why a message's resources could not be attached, with
// the status to answer.
type attachError struct {
	status int
	msg    string
}

func (e *attachError) Error() string { return e.msg }

// checkResourceRefs checks what a message asks to attach, before anything
// is read.
func (s *Server) checkResourceRefs(refs []resourceRef) *attachError {
	if len(refs) == 0 {
		return nil
	}
	if s.mcp == nil {
		return &attachError{http.StatusBadRequest, "resources: this server has no MCP servers"}
	}
	if len(refs) > maxAttached {
		return &attachError{http.StatusBadRequest, fmt.Sprintf("resources: at most %d a message", maxAttached)}
	}
	for _, ref := range refs {
		if ref.Server == "" || ref.URI == "" {
			return &attachError{http.StatusBadRequest, "resources: each needs a server and a uri"}
		}
	}
	return nil
}

// attachResources reads the resources a message attaches, in order, and
// returns the text to add to the message and the images to send with it.
// Each text comes between two lines that name its server and URI, in a
// code fence longer than any run of backticks it holds; binary data that
// is not an image the model can take is a line saying what it was.
func (s *Server) attachResources(ctx context.Context, sessionID string, refs []resourceRef) (string, []memory.Image, *attachError) {
	ctx, cancel := context.WithTimeout(ctx, resourceTimeout)
	defer cancel()
	var b strings.Builder
	var images []memory.Image
	for _, ref := range refs {
		parts, err := s.mcp.ReadResource(ctx, sessionID, ref.Server, ref.URI)
		switch {
		case errors.Is(err, mcpclient.ErrUnknownServer), errors.Is(err, mcpclient.ErrUnsupported):
			return "", nil, &attachError{http.StatusBadRequest, "resources: " + err.Error()}
		case errors.Is(err, mcpclient.ErrTooLarge):
			return "", nil, &attachError{http.StatusRequestEntityTooLarge, "resources: " + err.Error()}
		case err != nil:
			return "", nil, &attachError{http.StatusBadGateway, "resources: reading " + ref.URI + ": " + err.Error()}
		}
		for _, p := range parts {
			head := fmt.Sprintf("[Resource %s from MCP server %q", p.URI, ref.Server)
			if p.MIMEType != "" {
				head += ", " + p.MIMEType
			}
			b.WriteString("\n\n")
			if p.Blob == nil {
				fence := strings.Repeat("`", max(3, longestRun(p.Text, '`')+1))
				fmt.Fprintf(&b, "%s]\n%s\n%s\n%s\n[End of resource %s]", head, fence, p.Text, fence, p.URI)
				continue
			}
			img := memory.Image{MIMEType: p.MIMEType, Data: p.Blob}
			if strings.HasPrefix(p.MIMEType, "image/") && memory.ValidateImage(img) == nil {
				images = append(images, img)
				fmt.Fprintf(&b, "%s: an image, attached]", head)
				continue
			}
			fmt.Fprintf(&b, "%s: %d bytes of binary data, not shown]", head, len(p.Blob))
		}
		if b.Len() > maxAttachedText {
			return "", nil, &attachError{http.StatusRequestEntityTooLarge, fmt.Sprintf("resources: more than %d KiB of text together", maxAttachedText>>10)}
		}
	}
	return b.String(), images, nil
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := range len(s) {
		if s[i] == c {
			n++
			longest = max(longest, n)
		} else {
			n = 0
		}
	}
	return longest
}
