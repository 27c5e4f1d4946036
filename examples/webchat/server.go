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
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/skills"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/intent"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/jsonapi"
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

// DefaultSweepInterval is how often the sweeper of a durable Server looks
// for turns to resume when Options.SweepInterval is zero.
const DefaultSweepInterval = runner.DefaultSweepInterval

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
	// TrustHints lets the calls of tools whose trusted hints say read-only
	// and closed world run without a card (approval.ReadOnlyHints): an MCP
	// tool with readOnlyHint true and no openWorldHint true, of a server
	// whose configuration says "trusted". Every other call asks, and so
	// does an MCP tool whose definition changed since the user approved it.
	TrustHints bool
	// MCP, when not nil, offers the tools of its MCP servers after Tools
	// (a tool of Tools keeps a name both have: the MCP tool is offered as
	// <server>__<tool>), and GET /api/mcp/servers lists the servers. A
	// per_conversation server runs an instance per session. The Server
	// does not close it.
	MCP *mcpclient.Client
	// Store keeps the conversations; nil means a fresh memory.MemStore
	// that lives and dies with the Server, whose approvals then live in
	// the approval Manager only.
	//
	// A Store given here is taken to outlive the Server: when it keeps
	// open tool calls and approvals (memory.CallLog and
	// memory.ApprovalStore, as the SQLite and PostgreSQL stores do), a
	// turn waiting for a decision survives a restart. Close suspends it
	// instead of interrupting it, GET /api/history shows its cards, and a
	// decision resumes it (the runner's agent.Resume) in this process, its
	// chunks going to the session's event streams as a run's do; so does
	// the runner's sweeper, every SweepInterval, for every turn that can
	// go on. With a *pgstore.Store the Server is one replica of many: see
	// durable.go.
	Store memory.Store
	// Holder names this process to the Store's leases (runner.Config.Holder):
	// one process at a time drives a session's run. Empty means a random
	// name, new at every start.
	Holder string
	// LeaseTTL is how long the lease of a process that died keeps its
	// sessions; zero means runner.DefaultLeaseTTL.
	LeaseTTL time.Duration
	// SweepInterval is how often the runner's sweeper looks for turns to
	// resume; zero means DefaultSweepInterval. It runs only with a durable
	// Store.
	SweepInterval time.Duration
	// Logger receives what goes wrong outside a request (a store that
	// fails while a run's events are logged, a sweep); nil discards it.
	Logger *slog.Logger
	// TracerProvider receives the OpenTelemetry spans of the runs
	// (agent.Config.TracerProvider); nil means otel's global provider.
	TracerProvider trace.TracerProvider
	// ApprovalTimeout is how long an approval card waits before the call
	// is rejected; zero means approval.DefaultTimeout.
	ApprovalTimeout time.Duration
	// SuspendAfter, when positive and the Store is durable, is how long a
	// run waits for a decision or a form's answers before it is suspended
	// (runner.Config.SuspendAfter): its card or form stays answerable, and
	// the answer resumes the turn. Zero waits until ApprovalTimeout
	// (FormTimeout for a form).
	SuspendAfter time.Duration
	// SystemPrompt is the agent's system prompt.
	SystemPrompt string
	// SummarizeAt, when positive, moves the oldest half of a session into
	// a long-term summary written by the model once the session holds
	// that many active messages (agent.Config.SummarizeAt); zero never
	// summarises.
	SummarizeAt int
	// APILog says what the Store's API log keeps of each model call
	// (agent.Config.APILog; the page's Log panel and GET /api/apilog show
	// them, see apilog.go): the zero value and APILogFull keep the request
	// and the reply, APILogMetadata the metadata only, APILogOff nothing.
	// A Store that is no memory.APILog keeps nothing either.
	APILog APILogMode
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
	// MaxImports bounds the imports in flight at once in the whole server
	// (503 beyond); zero means DefaultMaxImports.
	MaxImports int
	// MaxImportsPerOwner bounds the imports in flight at once of one
	// browser (429 beyond); zero means DefaultMaxImportsPerOwner.
	MaxImportsPerOwner int
	// MaxImportBytes bounds the bytes of the imports in flight at once in
	// the whole server (503 beyond): an import counts the Content-Length
	// of its body, or MaxImportSize when it has none, from its start to
	// its end. Zero means DefaultMaxImportBytes, or MaxImportSize when
	// larger; a value below MaxImportSize is an error.
	MaxImportBytes int64
	// MaxImportBytesPerOwner bounds the bytes of the imports in flight at
	// once of one browser, counted as MaxImportBytes counts them (429
	// beyond). Zero means DefaultMaxImportBytesPerOwner, or MaxImportSize
	// when larger; a value below MaxImportSize is an error.
	MaxImportBytesPerOwner int64
}

// Server is the web chat: an http.Handler serving the page and the API, and
// the runs it started. Close ends them. The chat's protocol (send, events,
// history, decide, answer, stop, sessions) is package ui/jsonapi's; the
// rest of the API (export and import, the API log, the audit, skills, MCP,
// OAuth), the page and the owner cookie are the web chat's own.
//
// Every session (a browser tab's conversation, named by the page) has at
// most one run at a time, among every process that shares the Store, and
// any number of event streams (GET /api/events) that receive its events in
// order: the runner (package runner) drives the runs, numbers their events,
// and brings those of other processes.
type Server struct {
	agent     *agent.Agent
	runner    *runner.Runner
	skills    *skills.Set // nil without skills
	store     memory.Store
	tools     *agent.ToolRegistry
	mcp       *mcpclient.Client // nil without MCP servers
	info      info
	api       *jsonapi.Handler // the chat's protocol (package ui/jsonapi)
	handler   http.Handler     // the routes behind the CSRF and Host checks
	closeOnce sync.Once

	maxRunsPerOwner                int
	maxStreams, maxStreamsPerOwner int
	maxImport                      int64
	maxImports                     importLoad // in the whole server
	maxImportsPerOwner             importLoad // of one browser

	// durable is true when the Store outlives the process (Options.Store
	// set): approvals and open tool calls are kept there, runs waiting for
	// a decision are suspended at Close, and a decision that no run waits
	// for resumes the turn.
	durable bool
	logger  *slog.Logger

	// apiLog is the Store's API log, nil when it is off; apiLogMode says
	// what it keeps (APILogFull or APILogMetadata).
	apiLog     memory.APILog
	apiLogMode APILogMode

	mu           sync.Mutex          // guards live, closed and the counts below
	live         map[string]*session // sessions with a turn in progress here, or marks to keep
	closed       bool
	ownerRuns    map[string]int        // runs in progress per owner tag (this process's); no zero entries
	starting     map[string]int        // POST /api/chat in progress per owner tag; no zero entries
	streamCount  int                   // open event streams
	ownerStreams map[string]int        // open event streams per owner tag; no zero entries
	imports      importLoad            // imports in flight
	ownerImports map[string]importLoad // imports in flight per owner tag; no zero entries
}

// info is what the page learns in the hello event.
type info struct {
	Instance   string `json:"instance"` // changes at every start: a page tells a restart
	Model      string `json:"model"`
	ModelLabel string `json:"model_label,omitempty"`
	// ApprovalTimeout is the Manager's timeout in seconds.
	ApprovalTimeout float64 `json:"approval_timeout"`
	// Durable is true when approvals outlive the server (Options.Store).
	Durable bool `json:"durable,omitempty"`
	// APILog is what the API log keeps (full, metadata), absent when it
	// is off: the page shows its Log button.
	APILog APILogMode `json:"api_log,omitempty"`
	// Log names the turn log whose numbers the events carry: this
	// process's (its instance id), or the Store's. A durable page that
	// finds another log loads the history again, where its cards still
	// wait.
	Log string `json:"log"`
}

// session is what this process keeps of a session while its turns run
// here. Server.mu guards it.
type session struct {
	// turn is the Seq of the turn in progress that this process counts
	// for the session's owner; 0 when none.
	turn int64
}

// NewServer builds the agent from o and returns the Server.
func NewServer(o Options) (*Server, error) {
	if o.MaxRuns < 0 || o.MaxRunsPerOwner < 0 || o.MaxStreams < 0 || o.MaxStreamsPerOwner < 0 || o.BodyTimeout < 0 || o.MaxImportSize < 0 || o.LeaseTTL < 0 || o.SweepInterval < 0 ||
		o.MaxImports < 0 || o.MaxImportsPerOwner < 0 || o.MaxImportBytes < 0 || o.MaxImportBytesPerOwner < 0 {
		return nil, errors.New("webchat: negative limit in Options")
	}
	maxImport := cmp.Or(o.MaxImportSize, DefaultMaxImportSize)
	if b := min(cmp.Or(o.MaxImportBytes, maxImport), cmp.Or(o.MaxImportBytesPerOwner, maxImport)); b < maxImport {
		return nil, fmt.Errorf("webchat: MaxImportBytes and MaxImportBytesPerOwner must be at least MaxImportSize (%d), or an import of that size could never start: %d", maxImport, b)
	}
	apiLogMode := cmp.Or(o.APILog, APILogFull)
	if _, err := parseAPILogMode(string(apiLogMode)); err != nil {
		return nil, fmt.Errorf("webchat: Options.APILog %q: want full, metadata or off", o.APILog)
	}
	durable := false
	if o.Store == nil {
		o.Store = new(memory.MemStore)
	} else {
		_, calls := o.Store.(memory.CallLog)
		_, approvals := o.Store.(memory.ApprovalStore)
		durable = calls && approvals
	}
	s := &Server{
		store:   o.Store,
		durable: durable,
		logger:  cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
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
	extra := []agent.Tool{interact.AskUserQuestion()}
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
		Hooks:        o.Hooks,

		TracerProvider: o.TracerProvider,
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
	// Set after the researcher took its copy of cfg: it summarises
	// nothing, and inherits the API log (its calls are recorded with the
	// purpose sub_agent and the calling run's session).
	cfg.SummarizeAt = o.SummarizeAt
	if l, ok := o.Store.(memory.APILog); ok && apiLogMode != APILogOff {
		cfg.APILog, cfg.APILogMetadataOnly = l, apiLogMode == APILogMetadata
		s.apiLog, s.apiLogMode = l, apiLogMode
	}
	s.skills = o.Skills
	s.tools = tools
	s.mcp = o.MCP
	instance := randomID()
	s.info = info{
		Instance:        instance,
		Log:             instance,
		Model:           o.Model,
		ModelLabel:      o.ModelLabel,
		ApprovalTimeout: cmp.Or(o.ApprovalTimeout, approval.DefaultTimeout).Seconds(),
		Durable:         durable,
	}
	if s.apiLog != nil {
		s.info.APILog = s.apiLogMode
	}
	if _, shared := o.Store.(memory.EventLog); shared && durable {
		// The events are numbered in the Store's log: a page's numbers
		// stay good across restarts and replicas.
		s.info.Log = "store"
	}
	s.maxRunsPerOwner = cmp.Or(o.MaxRunsPerOwner, DefaultMaxRunsPerOwner)
	s.maxStreams = cmp.Or(o.MaxStreams, DefaultMaxStreams)
	s.maxStreamsPerOwner = cmp.Or(o.MaxStreamsPerOwner, DefaultMaxStreamsPerOwner)
	s.maxImport = maxImport
	s.maxImports = importLoad{cmp.Or(o.MaxImports, DefaultMaxImports), cmp.Or(o.MaxImportBytes, max(DefaultMaxImportBytes, maxImport))}
	s.maxImportsPerOwner = importLoad{cmp.Or(o.MaxImportsPerOwner, DefaultMaxImportsPerOwner), cmp.Or(o.MaxImportBytesPerOwner, max(DefaultMaxImportBytesPerOwner, maxImport))}
	s.live = make(map[string]*session)
	s.ownerRuns = make(map[string]int)
	s.starting = make(map[string]int)
	s.ownerStreams = make(map[string]int)
	s.ownerImports = make(map[string]importLoad)
	sweep := cmp.Or(o.SweepInterval, DefaultSweepInterval)
	if !durable {
		sweep = -1
	}
	var policies []approval.Policy
	if o.TrustHints {
		policies = append(policies, approval.ReadOnlyHints())
	}
	rcfg := runner.Config{
		Store:           o.Store,
		Agent:           cfg,
		Policies:        policies,
		ApprovalTimeout: o.ApprovalTimeout,
		FormTimeout:     o.FormTimeout,
		Holder:          o.Holder,
		LeaseTTL:        o.LeaseTTL,
		SweepInterval:   sweep,
		MaxRuns:         cmp.Or(o.MaxRuns, DefaultMaxRuns),
		// A MemStore of its own ends with the Server: nothing would resume
		// a suspended run.
		InterruptOnClose: !durable,
		Logger:           s.logger,
		OnEvent:          s.onEvent,
	}
	if durable {
		rcfg.SuspendAfter = o.SuspendAfter
	}
	s.runner, err = runner.New(rcfg)
	if err != nil {
		return nil, err
	}
	s.agent = s.runner.Agent()
	s.api, err = jsonapi.NewHandler(ui.Config{Runner: s.runner, Authorize: authorize, MaxBodyBytes: maxBody, Logger: s.logger}, jsonapi.Options{
		Hello:   s.info,
		Prepare: s.prepare,
		NewSessionID: func(r *http.Request) (string, error) {
			tag, ok := ownerTag(r)
			if !ok {
				return "", errNoOwner
			}
			return newSessionID(tag), nil
		},
		Sessions: func(r *http.Request) (func(memory.Session) bool, error) {
			tag, ok := ownerTag(r)
			if !ok {
				return nil, errNoOwner
			}
			return func(ss memory.Session) bool { return sessionOwner(ss.ID) == tag }, nil
		},
		Deleted: func(_ context.Context, id string) {
			if s.mcp != nil {
				s.mcp.CloseConversation(id)
			}
		},
	})
	if err != nil {
		s.runner.Close()
		return nil, err
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
	// Only the browser that opened a session may act on it (authorize).
	m := http.NewServeMux()
	m.Handle("/", securityHeaders(files))
	// The chat's protocol is ui/jsonapi's; the limits per browser are
	// the web chat's own.
	api := http.StripPrefix("/api", s.api)
	m.Handle("/api/chat", s.limitRuns(api))
	m.Handle("GET /api/events", s.limitStreams(api))
	for _, route := range []string{"GET /api/history", "/api/tool-approve", "/api/form-answer", "/api/interrupt",
		"GET /api/sessions", "/api/sessions", "/api/sessions/rename", "/api/sessions/delete"} {
		m.Handle(route, api)
	}
	m.HandleFunc("GET /api/sessions/export", s.handleExport)
	m.HandleFunc("/api/sessions/import", s.handleImport)
	m.HandleFunc("GET /api/audit", s.handleAudit)
	m.HandleFunc("GET /api/apilog", s.handleAPILog)
	m.HandleFunc("GET /api/apilog/call", s.handleAPICall)
	m.HandleFunc("/api/apilog/delete", s.handleAPILogDelete)
	m.HandleFunc("GET /api/skills", s.handleSkills)
	m.HandleFunc("GET /api/mcp/servers", s.handleMCPServers)
	m.HandleFunc("GET /api/mcp/resources", s.handleMCPResources)
	m.HandleFunc("/oauth/callback", s.handleOAuthCallback)
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

// Close ends every run and waits for them to end (their last events reach
// the open streams), then ends the event streams, the sweeper and the
// approval Manager. With a durable Store a run that waits for a decision
// is suspended: its cards stay answerable, and the next process on the
// Store resumes the turn when one is answered. Other runs are interrupted.
// It does not close the Store. Close is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.runner.Close()
	})
	return nil
}

// apiResponse is the JSON answer of the server's own endpoints:
// {"success":bool,"error":"..."}.
type apiResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// SessionID is set by POST /api/sessions.
	SessionID string `json:"session_id,omitempty"`
}

// onEvent is the runner's Config.OnEvent: it counts the runs of each owner
// in progress here. It runs under the runner's lock: it takes only s.mu.
func (s *Server) onEvent(id string, e runner.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case runner.EventTurnStarted:
		ss := s.live[id]
		if ss == nil {
			ss = &session{}
			s.live[id] = ss
		}
		if ss.turn == 0 {
			s.ownerRuns[sessionOwner(id)]++
		}
		ss.turn = e.Seq
	case runner.EventTurnEnded:
		ss := s.live[id]
		if ss == nil || ss.turn != e.Turn {
			return // a turn of another process, ended here
		}
		owner := sessionOwner(id)
		if s.ownerRuns[owner]--; s.ownerRuns[owner] <= 0 {
			delete(s.ownerRuns, owner)
		}
		delete(s.live, id)
	}
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

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
