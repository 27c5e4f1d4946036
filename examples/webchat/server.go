package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
)

//go:embed web
var webFiles embed.FS

// maxBody bounds the JSON bodies the server reads.
const maxBody = 1 << 20

// Defaults of the Options that bound the server's work.
const (
	DefaultMaxRuns            = 32
	DefaultMaxRunsPerOwner    = 4
	DefaultMaxStreams         = 1024
	DefaultMaxStreamsPerOwner = 16
	DefaultBodyTimeout        = 10 * time.Second
)

// Options configure a [Server].
type Options struct {
	// BaseURL, APIKey and Model select the OpenAI-compatible model.
	BaseURL, APIKey, Model string
	// HTTPClient makes the model requests; nil means the agent's default.
	HTTPClient *http.Client
	// ModelLabel is what the page header says about the model, such as
	// "built-in demo model"; empty shows the model name only.
	ModelLabel string
	// Tools are the tools offered to the model. ask_user_question (whose
	// forms the page shows) is always offered beside them, and so is
	// show_card unless Tools has a tool of that name.
	Tools []agent.Tool
	// Skills, when not nil, gives the model skills: the descriptions of
	// the enabled ones in a system block right after the system prompt,
	// and the get_skill tool for their text. GET /api/skills lists them
	// for the page's picker, and each message enables the skills it names
	// (all of them for a message that names none).
	Skills *skills.Set
	// Hooks inject prompts into the requests of every run (see
	// agent.Config.Hooks). The persistent ones are stored with the
	// conversation but never shown: GET /api/history leaves them out.
	Hooks []agent.Hook
	// FormTimeout is how long an ask_user_question form waits for the
	// user's answers before the call fails; zero means
	// interact.DefaultTimeout.
	FormTimeout time.Duration
	// Researcher offers the model the demo's researcher sub-agent
	// (demo.Researcher: get_weather and get_time, no planning round) on
	// the same model. Its own call skips approval; the calls it makes ask
	// for theirs, on cards the page draws under the researcher's.
	Researcher bool
	// MCP, when not nil, offers the tools of its MCP servers after Tools
	// (a tool of Tools keeps a name both have: the MCP tool is offered as
	// <server>__<tool>), and GET /api/mcp/servers lists the servers. A
	// per_conversation server runs an instance per session. The Server
	// does not close it.
	MCP *mcpclient.Client
	// Store keeps the conversations; nil means a fresh memory.MemStore.
	Store memory.Store
	// ApprovalTimeout is how long an approval card waits before the call
	// is rejected; zero means approval.DefaultTimeout.
	ApprovalTimeout time.Duration
	// SystemPrompt is the agent's system prompt.
	SystemPrompt string
	// Intents is the agent's intent tag dictionary; the zero value is
	// intent.DefaultDictionary(). Stored replies are shown without its
	// tags, as the live stream shows them.
	Intents intent.Dictionary

	// Token, when not empty, is asked of every request: a browser opens
	// the page once with ?token=<Token>, which sets a cookie; other
	// clients send Authorization: Bearer <Token>. Any Host name is then
	// accepted; without a token only localhost and IP addresses are.
	Token string
	// MaxRuns bounds the runs active at once in the whole server (503
	// beyond); zero means DefaultMaxRuns.
	MaxRuns int
	// MaxRunsPerOwner bounds the runs active at once of one browser (429
	// beyond); zero means DefaultMaxRunsPerOwner.
	MaxRunsPerOwner int
	// MaxStreams bounds the event streams (GET /api/events) open at once in
	// the whole server (503 beyond); zero means DefaultMaxStreams.
	MaxStreams int
	// MaxStreamsPerOwner bounds the event streams open at once of one
	// browser, all its tabs and sessions together (429 beyond); zero means
	// DefaultMaxStreamsPerOwner.
	MaxStreamsPerOwner int
	// BodyTimeout is how long a request's body may take to arrive (408
	// beyond); zero means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxImportSize bounds the body of POST /api/sessions/import, a
	// session export, in bytes (413 beyond); zero means
	// DefaultMaxImportSize.
	MaxImportSize int64
}

// Causes of a cancelled run, told apart with context.Cause.
var (
	errInterrupted = errors.New("interrupted by the user")
	errShutdown    = errors.New("the server is shutting down")
)

// Server is the web chat: an http.Handler serving the page and the API, and
// the runs it started. Close ends them.
//
// Every session (a browser tab's conversation, named by the page) has at
// most one run at a time and any number of event streams (GET /api/events)
// that receive its chunks in order.
type Server struct {
	agent     *agent.Agent
	approvals *approval.Manager
	forms     *interact.Forms
	skills    *skills.Set // nil without skills
	store     memory.Store
	tools     *agent.ToolRegistry
	mcp       *mcpclient.Client // nil without MCP servers
	info      info
	handler   http.Handler    // the routes behind the CSRF and Host checks
	base      context.Context // parent of every run's context
	stopBase  context.CancelCauseFunc
	closing   chan struct{} // closed by Close: event streams end
	runs      sync.WaitGroup
	closeOnce sync.Once

	maxRuns, maxRunsPerOwner       int
	maxStreams, maxStreamsPerOwner int
	maxImport                      int64

	mu           sync.Mutex          // guards sessions, closed, the counts below and everything reachable from sessions
	sessions     map[string]*session // sessions with a run or an event stream
	closed       bool
	runCount     int            // active runs
	ownerRuns    map[string]int // active runs per owner tag; no zero entries
	streamCount  int            // open event streams
	ownerStreams map[string]int // open event streams per owner tag; no zero entries
}

// info is what the page learns in the hello event.
type info struct {
	Instance   string `json:"instance"` // changes at every start: a page tells a restart
	Model      string `json:"model"`
	ModelLabel string `json:"model_label,omitempty"`
	// ApprovalTimeout is the Manager's timeout in seconds.
	ApprovalTimeout float64 `json:"approval_timeout"`
}

// session is one conversation's live state. Server.mu guards all of it.
type session struct {
	id       string
	run      *activeRun               // nil when idle
	subs     map[*subscriber]struct{} // open event streams
	deleting bool                     // POST /api/sessions/delete is deleting it from the Store
	// nested marks the approvals and forms of the active run that belong
	// to a sub-agent's run, by approval id and form id, so that a
	// reconnecting page draws them again where they were.
	nested map[string]nestedMark
}

// nestedMark is where a chunk of a sub-agent's run belongs: its Agent,
// Depth and Parent (see agent.Chunk) and its round.
type nestedMark struct {
	agent  string
	depth  int
	parent string
	round  int
}

// activeRun is a run in progress.
type activeRun struct {
	cancel context.CancelCauseFunc
}

// NewServer builds the agent from o and returns the Server.
func NewServer(o Options) (*Server, error) {
	if o.MaxRuns < 0 || o.MaxRunsPerOwner < 0 || o.MaxStreams < 0 || o.MaxStreamsPerOwner < 0 || o.BodyTimeout < 0 || o.MaxImportSize < 0 {
		return nil, errors.New("webchat: negative limit in Options")
	}
	if o.Store == nil {
		o.Store = new(memory.MemStore)
	}
	mgr, err := approval.NewManager(approval.ManagerConfig{Timeout: o.ApprovalTimeout})
	if err != nil {
		return nil, err
	}
	forms, err := interact.NewForms(interact.FormsConfig{Timeout: o.FormTimeout})
	if err != nil {
		return nil, err
	}
	tools, err := agent.NewToolRegistry(o.Tools...)
	if err != nil {
		return nil, err
	}
	if o.MCP != nil {
		if err := o.MCP.Register(tools); err != nil {
			return nil, err
		}
	}
	// The interactive tools the page draws: offered whatever Tools holds.
	extra := []agent.Tool{interact.AskUserQuestion(forms)}
	if _, _, ok := tools.Lookup("show_card"); !ok {
		extra = append(extra, interact.ShowCard())
	}
	if o.Skills != nil {
		extra = append(extra, o.Skills.Tool())
	}
	for _, t := range extra {
		if err := tools.Add(t); err != nil {
			return nil, err
		}
	}
	cfg := agent.Config{
		BaseURL:      o.BaseURL,
		APIKey:       o.APIKey,
		HTTPClient:   o.HTTPClient,
		Model:        o.Model,
		SystemPrompt: o.SystemPrompt,
		Intents:      o.Intents,
		Tools:        tools,
		Approver:     mgr,
		Store:        o.Store,
		Hooks:        o.Hooks,
	}
	if o.Skills != nil {
		// First: the skills block follows the system prompt directly.
		cfg.Layers = []memory.Layer{o.Skills.Layer()}
	}
	if o.Researcher {
		if err := addResearcher(tools, cfg); err != nil {
			return nil, err
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancelCause(context.Background())
	s := &Server{
		agent:     a,
		approvals: mgr,
		forms:     forms,
		skills:    o.Skills,
		store:     o.Store,
		tools:     tools,
		mcp:       o.MCP,
		info: info{
			Instance:        randomID(),
			Model:           o.Model,
			ModelLabel:      o.ModelLabel,
			ApprovalTimeout: mgr.Timeout().Seconds(),
		},
		base:               base,
		stopBase:           stop,
		closing:            make(chan struct{}),
		maxRuns:            cmp.Or(o.MaxRuns, DefaultMaxRuns),
		maxRunsPerOwner:    cmp.Or(o.MaxRunsPerOwner, DefaultMaxRunsPerOwner),
		maxStreams:         cmp.Or(o.MaxStreams, DefaultMaxStreams),
		maxStreamsPerOwner: cmp.Or(o.MaxStreamsPerOwner, DefaultMaxStreamsPerOwner),
		maxImport:          cmp.Or(o.MaxImportSize, DefaultMaxImportSize),
		sessions:           make(map[string]*session),
		ownerRuns:          make(map[string]int),
		ownerStreams:       make(map[string]int),
	}
	s.routes(o.Token, cmp.Or(o.BodyTimeout, DefaultBodyTimeout))
	return s, nil
}

func (s *Server) routes(token string, bodyTimeout time.Duration) {
	web, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(web)
	// Only the browser that opened a session may act on it; the approval
	// handlers ask the same question through their Authorize hook.
	owned := approval.HandlerConfig{Authorize: authorize}
	m := http.NewServeMux()
	m.Handle("/", securityHeaders(files))
	m.HandleFunc("GET /api/events", s.handleEvents)
	m.HandleFunc("/api/chat", s.handleChat)
	m.HandleFunc("/api/sessions", s.handleNewSession)
	m.HandleFunc("GET /api/sessions", s.handleListSessions)
	m.HandleFunc("/api/sessions/rename", s.handleRename)
	m.HandleFunc("/api/sessions/delete", s.handleDelete)
	m.HandleFunc("GET /api/sessions/export", s.handleExport)
	m.HandleFunc("/api/sessions/import", s.handleImport)
	m.HandleFunc("GET /api/history", s.handleHistory)
	m.HandleFunc("GET /api/skills", s.handleSkills)
	m.HandleFunc("GET /api/mcp/servers", s.handleMCPServers)
	m.Handle("/api/tool-approve", s.approvals.ApproveHandler(owned))
	m.Handle("/api/interrupt", s.approvals.InterruptHandler(s.interrupt, owned))
	m.Handle("/api/form-answer", s.forms.AnswerHandler(owned))
	// A page of another site must not start runs, approve calls or
	// interrupt them from the user's browser (CSRF).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, apiResponse{Error: "cross-origin request refused"})
	}))
	h := bodyDeadline(bodyTimeout, cop.Handler(m))
	if token != "" {
		// A rebinding page cannot hold the token's cookie: any Host will do.
		s.handler = requireToken(token, h)
	} else {
		s.handler = localHostOnly(h)
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// localHostOnly refuses requests whose Host is a name other than localhost:
// a DNS-rebinding page (evil.example resolving to 127.0.0.1) would otherwise
// be same-origin with the chat. IP addresses are accepted, so -addr may bind
// another interface.
func localHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if host != "localhost" && net.ParseIP(host) == nil {
			writeJSON(w, http.StatusMisdirectedRequest, apiResponse{Error: "unexpected Host " + strconv.Quote(r.Host) + ": use the address the server printed"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// securityHeaders forbids inline scripts and foreign resources on the page
// (but images: a card's image may come from anywhere, and the page loads
// one only when the user asks): a second wall behind the page's rule of
// never parsing model or tool text as HTML. It also gives a browser without
// one its owner cookie.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, apiResponse{Error: "method " + r.Method + " not allowed"})
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: http: https:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		giveOwnerCookie(w, r)
		h.ServeHTTP(w, r)
	})
}

// Close cancels every run, waits for them to end (their last events reach
// the open streams), then ends the event streams. It does not close the
// Store. Close is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.stopBase(errShutdown) // cancels every run's context
		s.runs.Wait()
		close(s.closing)
	})
	return nil
}

// sessionIDRe is what a session id may look like; POST /api/sessions makes
// them (see access.go).
var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func checkSessionID(id string) error {
	if id == "" {
		return errors.New("missing session_id")
	}
	if !sessionIDRe.MatchString(id) {
		return errors.New("session_id must be 1 to 64 letters, digits, '-' or '_'")
	}
	return nil
}

// sessionLocked returns the live state of id, creating it. s.mu must be
// held.
func (s *Server) sessionLocked(id string) *session {
	ss := s.sessions[id]
	if ss == nil {
		ss = &session{id: id, subs: make(map[*subscriber]struct{})}
		s.sessions[id] = ss
	}
	return ss
}

// forgetLocked drops a session's live state once nothing uses it. s.mu must
// be held.
func (s *Server) forgetLocked(ss *session) {
	if ss.run == nil && len(ss.subs) == 0 {
		delete(s.sessions, ss.id)
	}
}

// chatRequest is the body of POST /api/chat.
type chatRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	// Skills are the skills the run enables, the page's picker; null or
	// absent enables every skill.
	Skills []string `json:"skills"`
}

// apiResponse is the JSON answer of the server's own endpoints, shaped like
// approval.Response.
type apiResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// SessionID is set by POST /api/sessions.
	SessionID string `json:"session_id,omitempty"`
}

// handleChat starts a run: POST /api/chat {session_id, message}.
//
//	202 {"success":true}    the run started; its chunks go to the event streams
//	400                     malformed JSON, missing or invalid fields, a
//	                        message of white space only
//	401, 403                no owner cookie; the session is another browser's
//	409                     a run is already active in the session, or it
//	                        is being deleted
//	429                     this browser has MaxRunsPerOwner runs active
//	503                     the server is shutting down, or has MaxRuns runs
//	                        active
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if !checkSession(w, r, req.SessionID) {
		return
	}
	if strings.TrimSpace(req.Message) == "" {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "missing message"})
		return
	}
	if err := s.checkSkills(req.Skills); err != nil {
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: err.Error()})
		return
	}
	owner := sessionOwner(req.SessionID)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: "the server is shutting down"})
		return
	}
	ss := s.sessions[req.SessionID]
	switch {
	case ss != nil && ss.run != nil:
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, apiResponse{Error: "a run is already active in this session: wait for it or interrupt it"})
		return
	case ss != nil && ss.deleting:
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, apiResponse{Error: "this session is being deleted"})
		return
	case s.ownerRuns[owner] >= s.maxRunsPerOwner:
		s.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, apiResponse{Error: fmt.Sprintf("this browser already has %d runs active: wait for one to end or interrupt it", s.maxRunsPerOwner)})
		return
	case s.runCount >= s.maxRuns:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: fmt.Sprintf("the server is busy (%d runs active): try again shortly", s.maxRuns)})
		return
	}
	ss = s.sessionLocked(req.SessionID)
	s.runCount++
	s.ownerRuns[owner]++
	ctx, cancel := context.WithCancelCause(s.base)
	if req.Skills != nil {
		ctx = skills.WithEnabled(ctx, req.Skills...)
	}
	ss.run = &activeRun{cancel: cancel}
	// run_started is published here, under the lock, so it precedes every
	// chunk of the run and follows the previous run's run_done.
	s.publishLocked(ss, event{name: "run_started", data: mustJSON(struct{}{})})
	s.runs.Add(1)
	s.mu.Unlock()

	// Stored and titled now, not by the run: the session list shows it
	// once this answer is read.
	s.nameSession(req.SessionID, req.Message)
	go s.run(ctx, cancel, ss, req.Message)
	writeJSON(w, http.StatusAccepted, apiResponse{Success: true})
}

// runDone is the data of the run_done event.
type runDone struct {
	// Status is finished, interrupted, rejected or error.
	Status string `json:"status"`
	// Reason says why a run was rejected or interrupted by something else
	// than the user (a timeout, a shutdown).
	Reason string `json:"reason,omitempty"`
	// Cause is the cause of the rejection that ended the run (status
	// rejected), such as "user" or "timeout".
	Cause agent.Cause `json:"cause,omitempty"`
	// Error is the run's error (status error).
	Error string `json:"error,omitempty"`
}

// run ranges over one turn and forwards its chunks to the session's streams.
func (s *Server) run(ctx context.Context, cancel context.CancelCauseFunc, ss *session, message string) {
	defer s.runs.Done()
	defer cancel(nil)

	var (
		rejected    *agent.ToolCall // the rejected call that ended the run
		interrupted bool
		runErr      error
	)
	for c, err := range s.agent.Run(ctx, agent.Input{SessionID: ss.id, Message: message}) {
		if err != nil {
			runErr = err
			break
		}
		switch c.Kind {
		case agent.KindToolRejected:
			if rejected == nil && c.Depth == 0 && c.Tool != nil && endsRun(c.Tool.Cause) {
				rejected = c.Tool
			}
		case agent.KindInterrupted:
			if c.Depth == 0 { // a sub-agent's ends its own run only
				interrupted = true
			}
		}
		if c.Depth > 0 {
			s.markNested(ss, c)
		}
		data, err := json.Marshal(c)
		if err != nil {
			runErr = fmt.Errorf("encoding a chunk: %w", err)
			break
		}
		s.publish(ss, event{data: data})
	}

	done := runDone{Status: "finished"}
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, errShutdown):
		done = runDone{Status: "interrupted", Reason: errShutdown.Error()}
	case ctx.Err() != nil && errors.Is(cause, errInterrupted):
		done = runDone{Status: "interrupted"}
	case runErr != nil:
		done = runDone{Status: "error", Error: runErr.Error()}
	case interrupted && rejected != nil:
		done = runDone{Status: "rejected", Reason: rejected.Reason, Cause: rejected.Cause}
	case interrupted:
		done = runDone{Status: "interrupted"}
	}

	// The run is cleared and run_done published under one lock: a page that
	// sends its next message on run_done never meets a 409.
	s.mu.Lock()
	ss.run = nil
	ss.nested = nil
	s.runCount--
	owner := sessionOwner(ss.id)
	if s.ownerRuns[owner]--; s.ownerRuns[owner] == 0 {
		delete(s.ownerRuns, owner)
	}
	s.publishLocked(ss, event{name: "run_done", data: mustJSON(done)})
	s.forgetLocked(ss)
	s.mu.Unlock()
}

// endsRun reports whether a rejection of cause c can be the one that ends a
// run: not a call the run never got to, nor one the model is told about and
// may call again.
func endsRun(c agent.Cause) bool {
	switch c {
	case agent.CauseNotRun, agent.CauseIncomplete, agent.CauseInvalidArguments, agent.CauseUnknownTool:
		return false
	}
	return true
}

// interrupt cancels the session's run and its open forms, and reports
// whether there was a run. It is the function of the approval package's
// interrupt handler, which then cancels the session's pending approvals.
func (s *Server) interrupt(sessionID string) bool {
	s.forms.CancelSession(sessionID)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[sessionID]
	if ss == nil || ss.run == nil {
		return false
	}
	ss.run.cancel(errInterrupted)
	return true
}

// busy reports whether a run is active in the session.
func (s *Server) busy(sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[sessionID]
	return ss != nil && ss.run != nil
}

// historyEntry is one stored message as GET /api/history returns it.
type historyEntry struct {
	memory.Message
	// Text is an assistant message's content with its control tags
	// removed, as the page shows it.
	Text string `json:"text,omitempty"`
	// Images describe a user message's images ("image/png, 48 KB", or the
	// URL), which the page shows as placeholders: their bytes stay on the
	// server. It hides Message.Images in the JSON.
	Images []string `json:"images,omitempty"`
}

// handleHistory answers GET /api/history?session_id=... with the session's
// stored messages, oldest first, archived ones included; an unknown session
// has none.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	msgs, err := s.store.Messages(r.Context(), id, true)
	if errors.Is(err, memory.ErrNotFound) {
		msgs, err = nil, nil
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: err.Error()})
		return
	}
	out := make([]historyEntry, 0, len(msgs))
	for _, m := range msgs {
		if m.Hook {
			continue // sent to the model, never shown
		}
		e := historyEntry{Message: m}
		if m.Role == memory.RoleAssistant {
			e.Text = s.agent.VisibleText(m.Content)
		}
		for _, img := range m.Images {
			e.Images = append(e.Images, img.String())
		}
		out = append(out, e)
	}
	writeJSONValue(w, http.StatusOK, out)
}

// decodeJSON reads r's body, a single JSON object, into v. On failure it
// writes a JSON error answer and returns false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, apiResponse{Error: "method " + r.Method + " not allowed, use POST"})
		return false
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		writeJSON(w, http.StatusUnsupportedMediaType, apiResponse{Error: "the request body must be JSON (Content-Type: application/json)"})
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	err := dec.Decode(v)
	if err == nil {
		// Exactly one JSON value: anything after it is malformed, unless
		// reading it already went over the limit.
		switch _, terr := dec.Token(); {
		case terr == io.EOF:
		case errors.As(terr, new(*http.MaxBytesError)):
			err = terr
		default:
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, apiResponse{Error: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeJSON(w, http.StatusRequestTimeout, apiResponse{Error: "the request body did not arrive in time"})
	case errors.Is(err, io.EOF):
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "empty request body"})
	default:
		writeJSON(w, http.StatusBadRequest, apiResponse{Error: "malformed JSON: " + err.Error()})
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v apiResponse) { writeJSONValue(w, status, v) }

func writeJSONValue(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the server's own fixed types come here
	}
	return b
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
