package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/cdp"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// TestHistoryImages: the history describes a user message's images instead
// of sending their bytes to the page, which shows a placeholder for each.
func TestHistoryImages(t *testing.T) {
	leaktest.Check(t)
	st := new(memory.MemStore)
	h := newHarness(t, Options{Store: st})
	id := h.newSession(t)
	if _, err := st.CreateSession(t.Context(), memory.Session{ID: id}); err != nil && !errors.Is(err, memory.ErrExists) {
		require.NoError(t, err)
	}
	pixels := bytes.Repeat([]byte("pixel"), 10_000)
	_, err := st.Append(t.Context(), id,
		memory.Message{Role: memory.RoleUser, Content: "What is this?", Images: []memory.Image{
			{MIMEType: "image/png", Data: pixels},
			{URL: "https://example.com/cat.jpg"},
		}},
		memory.Message{Role: memory.RoleAssistant, Content: "A cat. <no_tool>"},
	)
	require.NoError(t, err)

	resp, err := h.client.Get(h.ts.URL + "/api/history?session_id=" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(body), base64.StdEncoding.EncodeToString(pixels[:300])), "no image bytes sent to the page")
	var hist []struct {
		Role    string
		Content string
		Images  []string
	}
	require.NoError(t, json.Unmarshal(body, &hist))
	require.Len(t, hist, 2)
	assert.Equal(t, "What is this?", hist[0].Content)
	assert.Equal(t, []string{"image/png, 49 KB", "https://example.com/cat.jpg"}, hist[0].Images)
	assert.Empty(t, hist[1].Images)
}

// TestBrowserHistoryImages: the page draws a placeholder for each image of
// a user message in the history, as text.
func TestBrowserHistoryImages(t *testing.T) {
	leaktest.Check(t)
	st := new(memory.MemStore)
	h := newHarness(t, Options{Store: st})
	b := cdp.Start(t)
	p := b.NewPage(1000, 700)
	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the event stream", `document.querySelector('#conn').textContent === 'connected'`)
	id := p.Str(`localStorage.getItem('planround.webchat.session')`)
	require.NotEmpty(t, id)
	if _, err := st.CreateSession(t.Context(), memory.Session{ID: id}); err != nil && !errors.Is(err, memory.ErrExists) {
		require.NoError(t, err)
	}
	_, err := st.Append(t.Context(), id,
		memory.Message{Role: memory.RoleUser, Content: "What is this?", Images: []memory.Image{
			{MIMEType: "image/png", Data: []byte("<img src=x onerror=window.__xss=3>")},
			{URL: "https://example.com/cat.jpg"},
		}},
		memory.Message{Role: memory.RoleAssistant, Content: "A cat. <no_tool>"},
	)
	require.NoError(t, err)

	p.Navigate(h.ts.URL + "/")
	p.WaitFor("the history", `document.querySelectorAll('.msg.user .attachment').length === 2`)
	assert.Equal(t, "What is this?[image: image/png, 34 bytes][image: https://example.com/cat.jpg]", p.Str(`document.querySelector('.msg.user').textContent`))
	assert.Equal(t, "0", p.Str(`String(document.querySelectorAll('#messages img').length)`))
	assert.Empty(t, b.PageErrors())
}
