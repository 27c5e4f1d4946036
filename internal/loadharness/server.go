package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Environment variables that make a re-executed binary (the command or a
// test binary) serve instead of measuring.
const (
	serveEnv  = "PLANROUND_LOAD_SERVER" // set to 1 to serve
	deltasEnv = "PLANROUND_LOAD_DELTAS" // deltas per continuation reply
	paceEnv   = "PLANROUND_LOAD_PACE"   // time between two deltas
)

// serving reports whether this process was started to be the server.
func serving() bool { return os.Getenv(serveEnv) == "1" }

// serveMain is the server process: it listens on 127.0.0.1, prints its URL
// on out, and serves until in ends.
func serveMain(in io.Reader, out io.Writer) error {
	deltas, err := strconv.Atoi(os.Getenv(deltasEnv))
	if err != nil || deltas < 1 {
		return fmt.Errorf("loadharness server: %s=%q is not a positive count", deltasEnv, os.Getenv(deltasEnv))
	}
	pace, err := time.ParseDuration(os.Getenv(paceEnv))
	if err != nil || pace < 0 {
		return fmt.Errorf("loadharness server: %s=%q is not a duration", paceEnv, os.Getenv(paceEnv))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("loadharness server: %w", err)
	}
	srv := &http.Server{Handler: &pacedServer{deltas: deltas, pace: pace}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(out, "http://%s/v1\n", ln.Addr())
	io.Copy(io.Discard, in)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pacedServer answers OpenAI chat-completions streaming requests like a
// paced model: the planning request with a short reply ending in
// <no_tool>, the continuation with deltas text deltas, pace apart.
type pacedServer struct {
	deltas int
	pace   time.Duration
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
}

// Frames of a reply; every delta is the same piece of text.
const (
	frameDelta = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n"
	framePlan  = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"role":"assistant","content":"Sure.<no_tool>"},"finish_reason":null}]}` + "\n\n"
	frameStop  = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	frameDone  = "data: [DONE]\n\n"
)

func (s *pacedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	continuation := false
	for _, m := range req.Messages {
		if m.Role == "assistant" { // the planning reply is in the history
			continuation = true
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 512)
	fl := http.NewResponseController(w)
	send := func(frame string) bool {
		bw.WriteString(frame)
		return bw.Flush() == nil && fl.Flush() == nil
	}
	if !continuation {
		_ = send(framePlan) && send(frameStop) && send(frameDone)
		return
	}
	t := time.NewTimer(s.pace)
	defer t.Stop()
	for i := range s.deltas {
		if i > 0 {
			t.Reset(s.pace)
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		if !send(frameDelta) {
			return
		}
	}
	_ = send(frameStop) && send(frameDone)
}
