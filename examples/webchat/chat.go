package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/ui/jsonapi"
)

// The chat's protocol is ui/jsonapi's (see routes). What the web chat adds
// to it is here: the fields of a message that the page's pickers fill
// (skills, MCP resources), and the bounds on one browser's runs and event
// streams.

// chatExtra is what the web chat reads of the body of POST /api/chat
// beside jsonapi.ChatRequest's session_id and message.
type chatExtra struct {
	// Skills are the skills the run enables, the page's picker; null or
	// absent enables every skill.
	Skills []string `json:"skills"`
	// Resources are MCP resources to attach: their text is added to the
	// message the model gets (see attachResources).
	Resources []resourceRef `json:"resources"`
}

// prepare is the jsonapi.Options.Prepare of POST /api/chat {session_id,
// message, skills?, resources?: [{server, uri}]}: it checks the skills and
// the resources the message names, enables the skills in the turn's
// context, and reads the resources from their MCP servers (the session's
// instance of a per_conversation one) to add them to the message (see
// attachResources). It refuses
//
//	400  an unknown skill, more than 8 resources, an unknown server or one
//	     without resources
//	413  the resources are too large (1 MiB of text)
//	502  a resource could not be read
func (s *Server) prepare(ctx context.Context, req jsonapi.ChatRequest, in *agent.Input) (context.Context, error) {
	var extra chatExtra
	if err := json.Unmarshal(req.Body, &extra); err != nil {
		return nil, &jsonapi.Error{Status: http.StatusBadRequest, Message: "malformed JSON: " + err.Error()}
	}
	if err := s.checkSkills(extra.Skills); err != nil {
		return nil, &jsonapi.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	if aerr := s.checkResourceRefs(extra.Resources); aerr != nil {
		return nil, &jsonapi.Error{Status: aerr.status, Message: aerr.Error()}
	}
	if extra.Skills != nil {
		ctx = skills.WithEnabled(ctx, extra.Skills...)
	}
	if len(extra.Resources) > 0 {
		text, images, aerr := s.attachResources(ctx, req.SessionID, extra.Resources)
		if aerr != nil {
			return nil, &jsonapi.Error{Status: aerr.status, Message: aerr.Error()}
		}
		in.Message += text
		in.Images = images
	}
	return ctx, nil
}

// limitRuns bounds the runs of one browser (its owner cookie's tag) that
// are active at once in this process, those starting included: 429 beyond
// Options.MaxRunsPerOwner, 503 once the server shuts down. A request
// without a cookie goes on, to be refused by the owner check.
func (s *Server) limitRuns(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, _ := ownerTag(r)
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: jsonapi.ReasonShutdown})
			return
		case s.ownerRuns[owner]+s.starting[owner] >= s.maxRunsPerOwner:
			s.mu.Unlock()
			writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser already has %d runs active: wait for one to end or interrupt it", s.maxRunsPerOwner)})
			return
		}
		s.starting[owner]++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			if s.starting[owner]--; s.starting[owner] == 0 {
				delete(s.starting, owner)
			}
			s.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// limitStreams bounds the event streams (GET /api/events) open at once:
// of one browser, all its tabs and sessions together (429 beyond
// Options.MaxStreamsPerOwner), and in the whole server (503 beyond
// Options.MaxStreams, and once it shuts down).
func (s *Server) limitStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, _ := ownerTag(r)
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: jsonapi.ReasonShutdown})
			return
		case s.ownerStreams[owner] >= s.maxStreamsPerOwner:
			s.mu.Unlock()
			writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser already has %d event streams open: close some tabs", s.maxStreamsPerOwner)})
			return
		case s.streamCount >= s.maxStreams:
			s.mu.Unlock()
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: fmt.Sprintf("the server is busy (%d event streams open): try again shortly", s.maxStreams)})
			return
		}
		s.streamCount++
		s.ownerStreams[owner]++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.streamCount--
			if s.ownerStreams[owner]--; s.ownerStreams[owner] == 0 {
				delete(s.ownerStreams, owner)
			}
			s.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}
