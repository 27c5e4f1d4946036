package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Environment variables that make a re-executed binary (the command or a
// test binary) serve instead of measuring.
const (
	serveEnv  = "PLANROUND_LOAD_SERVER" // set to 1 to serve
	deltasEnv = "PLANROUND_LOAD_DELTAS" // deltas per answer
	paceEnv   = "PLANROUND_LOAD_PACE"   // time between two deltas
	toolEnv   = "PLANROUND_LOAD_TOOL"   // the tool to call before answering; empty: no call
	argsEnv   = "PLANROUND_LOAD_ARGS"   // the call's arguments (a JSON object)
	tlsEnv    = "PLANROUND_LOAD_TLS"    // set to 1 to serve HTTPS (with HTTP/2) on a self-signed certificate
)

// ServerOptions is what the paced server answers.
type ServerOptions struct {
	Deltas int           // text deltas in the answer
	Pace   time.Duration // time between two deltas
	// Tool, when set, makes every turn call it once: the planning reply
	// ends with <need_tool>, the next request is answered with one call of
	// Tool with Args, and the request that carries its result with the
	// paced answer. Without Tool the planning reply ends with <no_tool> and
	// the continuation is the answer.
	Tool string
	Args string
	// TLS serves HTTPS with HTTP/2, as hosted providers do, on a
	// self-signed certificate the server prints after its URL (see
	// startServer), instead of plain HTTP/1.1.
	TLS bool
}

// env returns the environment that gives o to a re-executed server.
func (o ServerOptions) env() []string {
	return []string{serveEnv + "=1", deltasEnv + "=" + strconv.Itoa(o.Deltas),
		paceEnv + "=" + o.Pace.String(), toolEnv + "=" + o.Tool, argsEnv + "=" + o.Args,
		tlsEnv + "=" + map[bool]string{true: "1"}[o.TLS]}
}

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
	tool, args := os.Getenv(toolEnv), os.Getenv(argsEnv)
	if tool != "" && !json.Valid([]byte(args)) {
		return fmt.Errorf("loadharness server: %s=%q is not JSON", argsEnv, args)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("loadharness server: %w", err)
	}
	ps := newPacedServer(deltas, pace, tool, args)
	srv := &http.Server{Handler: ps, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ps.accepted.Add(1)
		}
	}}
	done := make(chan error, 1)
	if os.Getenv(tlsEnv) == "1" {
		cert, err := selfSigned()
		if err != nil {
			return fmt.Errorf("loadharness server: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert},
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				ps.handshakes.Add(1)
				return nil, nil
			}}
		// When many requests start at once, Go's client dials several
		// connections for one host and keeps the first that speaks
		// HTTP/2: the others end mid-handshake, which the server would
		// log by the hundred.
		srv.ErrorLog = log.New(io.Discard, "", 0)
		go func() { done <- srv.ServeTLS(ln, "", "") }()
		fmt.Fprintf(out, "https://%s/v1\ncert %s\n", ln.Addr(), base64.StdEncoding.EncodeToString(cert.Certificate[0]))
	} else {
		go func() { done <- srv.Serve(ln) }()
		fmt.Fprintf(out, "http://%s/v1\n", ln.Addr())
	}
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
// <no_tool> (or <need_tool> when it has a tool to call), the tool round
// with one call, and the answer with deltas text deltas, pace apart.
type pacedServer struct {
	// accepted counts the connections accepted and handshakes the TLS
	// handshakes begun; GET /stats answers both.
	accepted, handshakes atomic.Int64

	deltas   int
	pace     time.Duration
	tool     string
	callJSON string // the frame of the tool round's call, when tool is set
}

func newPacedServer(deltas int, pace time.Duration, tool, args string) *pacedServer {
	s := &pacedServer{deltas: deltas, pace: pace, tool: tool}
	if tool != "" {
		name, _ := json.Marshal(tool)
		quoted, _ := json.Marshal(args)
		s.callJSON = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_load","type":"function","function":{"name":` +
			string(name) + `,"arguments":` + string(quoted) + `}}]},"finish_reason":null}]}` + "\n\n"
	}
	return s
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// Frames of a reply; appendDelta makes those of the answer's deltas.
const (
	framePlan  = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"role":"assistant","content":"Sure.<no_tool>"},"finish_reason":null}]}` + "\n\n"
	frameNeed  = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check.<need_tool>"},"finish_reason":null}]}` + "\n\n"
	frameStop  = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	frameCalls = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n"
	frameDone  = "data: [DONE]\n\n"
	// A delta's text is "t" and the time the server wrote it, in Unix
	// nanoseconds, and a space: the client reads the delay of each delta
	// from it (see stamps).
	deltaHead = `data: {"id":"load","object":"chat.completion.chunk","created":1,"model":"load","choices":[{"index":0,"delta":{"content":"t`
	deltaTail = ` "},"finish_reason":null}]}` + "\n\n"
)

// appendDelta appends the frame of a delta written at now to b.
func appendDelta(b []byte, now time.Time) []byte {
	b = append(b, deltaHead...)
	b = strconv.AppendInt(b, now.UnixNano(), 10)
	return append(b, deltaTail...)
}

// stamps calls fn with each write time that the delta text in b carries:
// a "t" and 16 to 19 digits (Unix nanoseconds have 19 until 2286).
func stamps[T string | []byte](b T, fn func(unixNano int64)) {
	for i := 0; i < len(b); i++ {
		if b[i] != 't' {
			continue
		}
		var v int64
		j := i + 1
		for ; j < len(b) && j-i <= 19 && '0' <= b[j] && b[j] <= '9'; j++ {
			v = v*10 + int64(b[j]-'0')
		}
		if j-i-1 >= 16 {
			fn(v)
		}
		i = j - 1
	}
}

// serverStats is the answer of GET /stats.
type serverStats struct {
	Accepted   int64 `json:"accepted"`   // connections accepted
	Handshakes int64 `json:"handshakes"` // TLS handshakes begun
}

func (s *pacedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/stats" {
		json.NewEncoder(w).Encode(serverStats{Accepted: s.accepted.Load(), Handshakes: s.handshakes.Load()})
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	// What the model has said since the user's last message decides the
	// reply: nothing (planning), its plan (the tool round, or with no
	// tool the answer), or a tool result (the answer). The agent's
	// "[continue]" after the plan is not a user's message.
	since := req.Messages
	for i, m := range req.Messages {
		if m.Role == "user" && string(m.Content) != `"[continue]"` {
			since = req.Messages[i+1:]
		}
	}
	planned, called := false, false
	for _, m := range since {
		switch m.Role {
		case "assistant":
			planned = true
		case "tool":
			called = true
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 512)
	fl := http.NewResponseController(w)
	flush := func() bool { return bw.Flush() == nil && fl.Flush() == nil }
	send := func(frame string) bool {
		bw.WriteString(frame)
		return flush()
	}
	switch {
	case !planned && s.tool == "":
		_ = send(framePlan) && send(frameStop) && send(frameDone)
		return
	case !planned:
		_ = send(frameNeed) && send(frameStop) && send(frameDone)
		return
	case s.tool != "" && !called:
		_ = send(s.callJSON) && send(frameCalls) && send(frameDone)
		return
	}
	t := time.NewTimer(s.pace)
	defer t.Stop()
	var frame []byte
	for i := range s.deltas {
		if i > 0 {
			t.Reset(s.pace)
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		frame = appendDelta(frame[:0], time.Now())
		bw.Write(frame)
		if !flush() {
			return
		}
	}
	_ = send(frameStop) && send(frameDone)
}

// selfSigned makes a certificate for 127.0.0.1 that signs itself.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loadharness"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
