package agent_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
)

var (
	testPNG = memory.Image{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00 pixels")}
	testURL = memory.Image{URL: "https://example.com/cat.jpg"}
)

// imageURLs returns the URLs of the image parts of the request's
// messages, and the text of the message that carries them (the text parts
// come first).
func imageURLs(req *agenttest.Request) (urls []string, text string) {
	for _, m := range req.Messages {
		for k, p := range m.Parts {
			if p.Type == "image_url" {
				urls = append(urls, p.ImageURL)
				text = m.Content
				if m.Parts[0].Type != "text" || m.Role != "user" {
					text = "not a user message starting with its text"
				}
			} else if k > 0 && m.Parts[k-1].Type == "image_url" {
				text = "text after an image"
			}
		}
	}
	return urls, text
}

// TestImages: the images of an Input go with the user's text as content
// parts (bytes as a data: URL) in every request of the turn, in both
// shapes; they are persisted with the user message; later turns send a
// line of text in their place, or the images again with KeepImages.
func TestImages(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			srv := newServer(t)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st }, weatherTool())
			srv.Enqueue(planNoTool(), agenttest.Reply().Text("A cat.").Finish("stop"))
			turn := a.NewTurn(agent.Input{SessionID: "s", Message: "What is this?", Images: []memory.Image{testPNG, testURL}})
			_, err := collect(turn.Run(t.Context()))
			require.NoError(t, err)

			wantURLs := []string{"data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG.Data), testURL.URL}
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			for _, req := range reqs {
				urls, text := imageURLs(req)
				assert.Equal(t, wantURLs, urls, "request %d", req.Seq)
				assert.True(t, strings.HasPrefix(text, "What is this?"), "request %d: the text goes with the images: %q", req.Seq, text)
			}
			assert.Equal(t, []memory.Image{testPNG, testURL}, turn.Messages()[0].Images)
			stored, err := st.Messages(t.Context(), "s", false)
			require.NoError(t, err)
			assert.Equal(t, []memory.Image{testPNG, testURL}, stored[0].Images, "persisted with the user message")

			// The next turn sends a line of text instead.
			srv.Enqueue(planNoTool(), agenttest.Reply().Text("Fine.").Finish("stop"))
			_, err = collect(a.Run(t.Context(), agent.Input{SessionID: "s", Message: "Thanks."}))
			require.NoError(t, err)
			for _, req := range srv.Requests()[2:] {
				urls, _ := imageURLs(req)
				assert.Empty(t, urls, "request %d: old images are not sent again", req.Seq)
				assert.Contains(t, req.Messages[0].Content+req.Messages[1].Content,
					"What is this?\n\n[earlier image: image/png, 16 bytes]\n[earlier image: https://example.com/cat.jpg]")
			}

			// With KeepImages they are.
			keep := newAgent(t, srv, func(c *agent.Config) { c.Store = st; c.Truncate.KeepImages = true }, weatherTool())
			srv.Enqueue(planNoTool(), agenttest.Reply().Text("Fine.").Finish("stop"))
			_, err = collect(keep.Run(t.Context(), agent.Input{SessionID: "s", Message: "Look again."}))
			require.NoError(t, err)
			for _, req := range srv.Requests()[4:] {
				urls, _ := imageURLs(req)
				assert.Equal(t, wantURLs, urls, "request %d", req.Seq)
			}
		})
	}
}

// TestImagesInvalid: an image that cannot be sent ends the run with an
// error naming it, before anything is saved or sent; Preview reports the
// same error.
func TestImagesInvalid(t *testing.T) {
	tests := []struct {
		name string
		img  memory.Image
		want string
	}{
		{"empty", memory.Image{}, "neither URL nor Data"},
		{"no type", memory.Image{Data: []byte("x")}, "MIMEType"},
		{"too large", memory.Image{MIMEType: "image/png", Data: make([]byte, memory.MaxImageSize+1)}, "larger than MaxImageSize"},
		{"local file", memory.Image{URL: "file:///etc/passwd"}, "want an http, https or data URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := new(memory.MemStore)
			srv := newServer(t)
			a := newAgent(t, srv, func(c *agent.Config) { c.Store = st })
			in := agent.Input{SessionID: "s", Message: "look", Images: []memory.Image{testURL, tt.img}}
			turn := a.NewTurn(in)
			chunks, err := collect(turn.Run(t.Context()))
			require.Error(t, err)
			assert.Empty(t, chunks)
			assert.Contains(t, err.Error(), "Input.Images[1]")
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, srv.Requests())
			assert.Empty(t, turn.Messages())
			_, err = st.Session(t.Context(), "s")
			assert.ErrorIs(t, err, memory.ErrNotFound, "nothing saved")

			_, err = a.Preview(t.Context(), in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Input.Images[1]")
		})
	}
}

// TestImagesInStrictHistory: consecutive user messages with images (an
// earlier turn that got no answer) become one message whose parts hold
// every image, in order, under a strict template.
func TestImagesInStrictHistory(t *testing.T) {
	srv := newServer(t)
	srv.Enforce(agenttest.CheckAll)
	a := newAgent(t, srv, func(c *agent.Config) {
		c.RequestShape = agent.ShapeStrict
		c.Truncate.KeepImages = true
	})
	srv.Enqueue(planNoTool(), agenttest.Reply().Text("Two cats.").Finish("stop"))
	history := []memory.Message{{Role: memory.RoleUser, Content: "First:", Images: []memory.Image{testURL}}}
	_, err := collect(a.Run(t.Context(), agent.Input{History: history, Message: "Second:", Images: []memory.Image{testPNG}}))
	require.NoError(t, err)
	for _, req := range srv.Requests() {
		urls, text := imageURLs(req)
		assert.Equal(t, []string{testURL.URL, "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG.Data)}, urls)
		assert.True(t, strings.HasPrefix(text, "First:\n\nSecond:"), text)
	}
}

// TestSummaryTranscriptNamesImages: the transcript the summary model reads
// says where images were, without their bytes.
func TestSummaryTranscriptNamesImages(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(agenttest.Reply().Text("The user showed a cat.").Finish("stop"))
	a := newAgent(t, srv, nil)
	sum, err := a.SummaryModel().Summarize(t.Context(), []memory.Message{
		{Role: memory.RoleUser, Content: "What is this?", Images: []memory.Image{testPNG, testURL}},
		{Role: memory.RoleAssistant, Content: "A cat. <no_tool>"},
	})
	require.NoError(t, err)
	assert.Equal(t, "The user showed a cat.", sum)
	tr := srv.Requests()[0].LastMessage().Content
	assert.Contains(t, tr, "user: What is this?\nuser sent an image: image/png, 16 bytes\nuser sent an image: https://example.com/cat.jpg\nassistant: A cat.\n")
	urls, _ := imageURLs(srv.Requests()[0])
	assert.Empty(t, urls, "the summary request carries no image")
}
