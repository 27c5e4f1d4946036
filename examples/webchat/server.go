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
	"regexp"
	"slices"
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
// the runs it started. Close ends them.
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
	handler   http.Handler  // the routes behind the CSRF and Host checks
	closing   chan struct{} // closed by Close: event streams end
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
	// nested marks the approvals and forms of the turn that belong to a
	// sub-agent's run, by approval id and form id, so that a reconnecting
	// page draws them again where they were.
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
	s.closing = make(chan struct{})
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
	s.routes(o.Token, cmp.Or(o.BodyTimeout, DefaultBodyTimeout))
	return s, nil
}

func (s *Server) routes(token string, bodyTimeout time.Duration) {
	web, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(web)
	// Only the browser that opened a session may act on it; the person's
	// requests (decide.go) ask the same question through owned.
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
	m.HandleFunc("GET /api/audit", s.handleAudit)
	m.HandleFunc("GET /api/apilog", s.handleAPILog)
	m.HandleFunc("GET /api/apilog/call", s.handleAPICall)
	m.HandleFunc("/api/apilog/delete", s.handleAPILogDelete)
	m.HandleFunc("GET /api/skills", s.handleSkills)
	m.HandleFunc("GET /api/mcp/servers", s.handleMCPServers)
	m.HandleFunc("GET /api/mcp/resources", s.handleMCPResources)
	m.HandleFunc("/oauth/callback", s.handleOAuthCallback)
	m.HandleFunc("/api/tool-approve", s.handleApprove)
	m.HandleFunc("/api/interrupt", s.handleInterrupt)
	m.HandleFunc("/api/form-answer", s.handleFormAnswer)
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

// chatRequest is the body of POST /api/chat.
type chatRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	// Skills are the skills the run enables, the page's picker; null or
	// absent enables every skill.
	Skills []string `json:"skills"`
	// Resources are MCP resources to attach: their text is added to the
	// message the model gets (see attachResources).
	Resources []resourceRef `json:"resources"`
}

// apiResponse is the JSON answer of the server's own endpoints:
// {"success":bool,"error":"..."}.
type apiResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// SessionID is set by POST /api/sessions.
	SessionID string `json:"session_id,omitempty"`
}

// handleChat starts a run: POST /api/chat {session_id, message, skills?,
// resources?: [{server, uri}]}. The resources are read from their MCP
// servers (the session's instance of a per_conversation one) before the
// run starts, and added to the message (see attachResources).
//
//	202 {"success":true}    the run started; its chunks go to the event streams
//	400                     malformed JSON, missing or invalid fields, a
//	                        message of white space only, more than 8
//	                        resources, an unknown server or one without
//	                        resources
//	401, 403                no owner cookie; the session is another browser's
//	409                     a run is already active in the session (here or
//	                        on another replica)
//	413                     the resources are too large (1 MiB of text)
//	429                     this browser has MaxRunsPerOwner runs active
//	502                     a resource could not be read
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
	if aerr := s.checkResourceRefs(req.Resources); aerr != nil {
		writeJSON(w, aerr.status, apiResponse{Error: aerr.Error()})
		return
	}
	owner := sessionOwner(req.SessionID)
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: "the server is shutting down"})
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

	ctx := r.Context()
	if req.Skills != nil {
		ctx = skills.WithEnabled(ctx, req.Skills...)
	}
	in := agent.Input{SessionID: req.SessionID, Message: req.Message}
	if len(req.Resources) > 0 {
		text, images, aerr := s.attachResources(ctx, req.SessionID, req.Resources)
		if aerr != nil {
			writeJSON(w, aerr.status, apiResponse{Error: aerr.Error()})
			return
		}
		in.Message += text
		in.Images = images
	}
	// Stored and titled now, not by the run: the session list shows it
	// once this answer is read. The title is the user's own words.
	s.nameSession(ctx, req.SessionID, req.Message)
	// Acknowledged once stored: a server killed after its 202 keeps the
	// message (a run that could not store it says why on the stream).
	_, err := s.runner.Start(ctx, in)
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, apiResponse{Success: true})
	case errors.Is(err, agent.ErrBusy):
		writeJSON(w, http.StatusConflict, apiResponse{Error: "a run is already active in this session: wait for it or interrupt it"})
	case errors.Is(err, runner.ErrTooManyRuns):
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: "the server is busy (too many runs active): try again shortly"})
	case errors.Is(err, runner.ErrClosed):
		writeJSON(w, http.StatusServiceUnavailable, apiResponse{Error: "the server is shutting down"})
	default:
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: "starting the run: " + err.Error()})
	}
}

// onEvent is the runner's Config.OnEvent: it counts the runs of each owner
// in progress here, and keeps where a sub-agent's approvals and forms are
// drawn. It runs under the runner's lock: it takes only s.mu.
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
		ss.turn, ss.nested = e.Seq, nil
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
	case runner.EventChunk:
		if e.Chunk.Depth > 0 {
			s.markNestedLocked(id, *e.Chunk)
		}
	}
}

// busy reports whether a run is active in the session, here or on another
// replica.
func (s *Server) busy(sessionID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running, err := s.runner.Running(ctx, sessionID)
	return err == nil && running
}

// runDone is the data of the run_done event.
type runDone struct {
	// Status is finished, interrupted, rejected, suspended or error.
	// suspended: the run stopped at approvals that still wait (the server
	// shut down, or they waited too long); their cards stay answerable,
	// and a decision resumes the turn.
	Status string `json:"status"`
	// Reason says why a run was rejected, interrupted or suspended by
	// something else than the user (a timeout, a shutdown).
	Reason string `json:"reason,omitempty"`
	// Cause is the cause of the rejection that ended the run (status
	// rejected), such as "user" or "timeout".
	Cause agent.Cause `json:"cause,omitempty"`
	// Error is the run's error (status error).
	Error string `json:"error,omitempty"`
	// Turn is the number of the run's run_started event.
	Turn int64 `json:"turn,omitempty"`
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
	// OpenCalls are the calls of an assistant message that have no tool
	// message yet (a turn that waits for decisions, or runs them), with
	// what the page needs to draw their cards: answerable ones with their
	// approval id.
	OpenCalls []openCall `json:"open_calls,omitempty"`
}

// openCall is a call of a stored assistant message whose tool message is
// not stored yet (memory.OpenCall), as GET /api/history tells the page.
type openCall struct {
	CallID string `json:"call_id"`
	// State is "approval" (waits for a decision: the card is answerable
	// with ApprovalID), "pending" (its approval is not requested yet),
	// "approved" or "rejected" (decided: the turn goes on when it is
	// resumed), or "executing" (its tool was running).
	State      string `json:"state"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Tool and ArgumentsDigest are, with CallID, the call the approval
	// shows (approval.PendingApproval.Call), as a decision names it: set
	// with ApprovalID.
	Tool            string `json:"tool,omitempty"`
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Reason is a rejection's reason.
	Reason string `json:"reason,omitempty"`
	// Form is the open form of an executing ask_user_question call (one
	// that waits for the user's answers, perhaps in a suspended turn), to
	// draw in its card.
	Form *interact.FormRequest `json:"form,omitempty"`
	// Elicitation is the open form of an MCP server's request for input
	// of an executing call, to draw in its card.
	Elicitation *interact.ElicitationRequest `json:"elicitation,omitempty"`
}

// History headers: where the history ends in the session's turn log.
const (
	// headerSeq is the number of the last event of the session's turn log
	// that the history includes: the page opens the event stream after it.
	headerSeq = "X-Webchat-Seq"
	// headerRunning is "true" when a run is in progress: the history ends
	// where it started, and the event stream brings the rest.
	headerRunning = "X-Webchat-Running"
)

// handleHistory answers GET /api/history?session_id=... with the session's
// stored messages, oldest first, archived ones included; an unknown session
// has none. The calls that have no tool message yet come with their state
// (historyEntry.OpenCalls).
//
// While a run is in progress the messages end where it started (the event
// stream brings the rest, the text streamed so far included), and the
// X-Webchat-Running header is "true". X-Webchat-Seq is the number of the
// last event of the session's turn log the answer includes: the page asks
// GET /api/events for the events after it.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if !checkSession(w, r, id) {
		return
	}
	ctx := r.Context()
	var (
		state runner.LogState
		msgs  []memory.Message
		open  map[int64][]openCall
		err   error
	)
	// The log, the messages, and the log again: a run that started or
	// ended in between is read again, so the messages and the number
	// agree.
	for range 3 {
		var before runner.LogState
		if before, err = s.runner.Log(ctx, id); err != nil {
			break
		}
		if msgs, err = s.store.Messages(ctx, id, true); errors.Is(err, memory.ErrNotFound) {
			msgs, err = nil, nil
		}
		if err != nil {
			break
		}
		if open, err = s.openCalls(ctx, id); err != nil {
			break
		}
		if state, err = s.runner.Log(ctx, id); err != nil || (state.Last == before.Last && state.Turn == before.Turn) {
			break
		}
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiResponse{Error: err.Error()})
		return
	}
	seq := state.Last
	if state.Running() {
		msgs = slices.DeleteFunc(msgs, func(m memory.Message) bool { return m.ID > state.Started.History })
		seq = state.Turn - 1
		w.Header().Set(headerRunning, "true")
	}
	w.Header().Set(headerSeq, strconv.FormatInt(seq, 10))
	out := make([]historyEntry, 0, len(msgs))
	for _, m := range msgs {
		if m.Hook {
			continue // sent to the model, never shown
		}
		e := historyEntry{Message: m, OpenCalls: open[m.ID]}
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

// openCalls returns the session's open calls by the id of their assistant
// message, when the Store keeps them; nil otherwise.
func (s *Server) openCalls(ctx context.Context, id string) (map[int64][]openCall, error) {
	calls, ok := s.store.(memory.CallLog)
	if !ok {
		return nil, nil
	}
	recs, err := calls.OpenCalls(ctx, id)
	if errors.Is(err, memory.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the open calls: %w", err)
	}
	approvals, _ := s.store.(memory.ApprovalStore)
	cards, forms, err := s.pending(ctx, id)
	if err != nil {
		return nil, err
	}
	// The digests the cards show, as the Manager lists them: it gives a
	// record stored without one (by a version before digests) the digest
	// of its arguments.
	digests := make(map[string]string)
	for _, c := range cards {
		digests[c.ApprovalID] = c.Call.ArgumentsDigest
	}
	out := make(map[int64][]openCall)
	for _, rec := range recs {
		oc := openCall{CallID: rec.CallID, State: "pending", ApprovalID: rec.ApprovalID}
		switch {
		case rec.Executing:
			oc.State = "executing"
			oc.Form, oc.Elicitation = openForm(forms, rec)
		case rec.ApprovalID != "" && approvals != nil:
			a, err := approvals.GetApproval(ctx, rec.ApprovalID)
			switch {
			case errors.Is(err, memory.ErrNotFound):
				// Requested but not stored: a resumed turn asks again.
			case err != nil:
				return nil, fmt.Errorf("reading approval %s: %w", rec.ApprovalID, err)
			case !a.Decided:
				oc.State = "approval"
				oc.Tool, oc.ArgumentsDigest = a.Tool, digests[a.ID]
			case a.Decision.Approved:
				oc.State = "approved"
			default:
				oc.State, oc.Reason = "rejected", a.Decision.Reason
			}
		}
		if oc.State != "approval" {
			oc.ApprovalID = "" // nothing to answer
		}
		out[rec.MessageID] = append(out[rec.MessageID], oc)
	}
	return out, nil
}

// openForm returns the open form of the executing call rec (a question
// form or an MCP server's request for input), or nils: the
// form whose id the record holds (a call that suspended its run while the
// form waits), or, for a record without one, the open form of its call id.
func openForm(forms []interact.PendingForm, rec memory.OpenCall) (*interact.FormRequest, *interact.ElicitationRequest) {
	for _, f := range forms {
		if rec.ApprovalID == f.FormID || rec.ApprovalID == "" && rec.CallID == f.CallID {
			if f.Elicitation != nil {
				return nil, f.Elicitation
			}
			return &f.FormRequest, nil
		}
	}
	return nil, nil
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
