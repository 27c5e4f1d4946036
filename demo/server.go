package demo

import (
	"crypto/rand"

	"github.com/planround/planround/agent/agenttest"
)

// Server is the demo model listening on 127.0.0.1.
//
// It answers only the process that started it: every request must carry
// its API key ([Server.APIKey], a random one per server) as a bearer token,
// which an OpenAI client sends when given the key. It keeps none of the
// requests it answered, so a long-running web chat does not grow with
// every turn.
type Server struct {
	srv *agenttest.Server
	key string
}

// NewServer starts a [Server] that answers every request with m.Respond.
// Call Close when done.
func (m Model) NewServer() *Server {
	s := &Server{srv: agenttest.NewServer(), key: rand.Text()}
	s.srv.KeepRequests(0)
	s.srv.RequireAPIKey(s.key)
	s.srv.Respond(m.Respond)
	return s
}

// URL returns the base URL for an OpenAI client, ending in "/v1".
func (s *Server) URL() string { return s.srv.URL() }

// APIKey returns the key the server requires.
func (s *Server) APIKey() string { return s.key }

// Close shuts the server down and ends the streams in progress.
func (s *Server) Close() { s.srv.Close() }
