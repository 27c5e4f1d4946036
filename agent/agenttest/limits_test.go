package agenttest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
)

func TestKeepRequests(t *testing.T) {
	leaktest.Check(t)
	s := agenttest.NewServer()
	defer s.Close()
	s.Respond(func(*agenttest.Request) agenttest.Response { return agenttest.Reply().Text("ok").Finish("stop") })
	c := newClient(s)
	ask := func(n int) {
		for range n {
			require.NoError(t, read(context.Background(), c, params()).err)
		}
	}

	ask(3)
	require.Len(t, s.Requests(), 3, "all are kept by default")
	s.KeepRequests(2)
	got := s.Requests()
	require.Len(t, got, 2, "the oldest is dropped at once")
	assert.Equal(t, []int{2, 3}, []int{got[0].Seq, got[1].Seq})
	ask(2)
	got = s.Requests()
	require.Len(t, got, 2)
	assert.Equal(t, []int{4, 5}, []int{got[0].Seq, got[1].Seq}, "Seq counts every request, kept or not")
	s.KeepRequests(0)
	ask(1)
	assert.Empty(t, s.Requests())
}

func TestRequireAPIKey(t *testing.T) {
	leaktest.Check(t)
	s := agenttest.NewServer()
	defer s.Close()
	s.Respond(func(*agenttest.Request) agenttest.Response { return agenttest.Reply().Text("ok").Finish("stop") })
	s.RequireAPIKey("secret")
	for _, key := range []string{"k", "secretx", "secre"} {
		c := openai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey(key), option.WithHTTPClient(s.Client()), option.WithMaxRetries(0))
		err := read(context.Background(), c, params()).err
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, "key %q", key)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode, "key %q", key)
	}
	// No Authorization header at all.
	resp, err := s.Client().Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Empty(t, s.Requests(), "a refused request is not recorded")

	c := openai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("secret"), option.WithHTTPClient(s.Client()), option.WithMaxRetries(0))
	r := read(context.Background(), c, params())
	require.NoError(t, r.err)
	assert.Equal(t, "ok", r.text)
}
