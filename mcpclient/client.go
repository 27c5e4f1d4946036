package mcpclient

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/memory"
)

// Options configures a [Client]. The zero value is ready to use.
type Options struct {
	// Logger receives the client's records: servers started, lost and
	// reconnected, tool lists changed, and what stdio servers write to
	// their standard error (at debug level). Secrets are redacted. Nil
	// discards them.
	Logger *slog.Logger
	// MaxSandboxes bounds the running instances of each per_conversation
	// server: to start another, the least recently used idle one is ended.
	// Zero means 16.
	MaxSandboxes int
	// SandboxIdle ends a conversation's instance after it went unused this
	// long. Zero means 10 minutes.
	SandboxIdle time.Duration
	// ClientName is the name the client gives servers in the handshake.
	// Empty means "planround".
	ClientName string
	// UserOf names the person a call is made for, from the call's context
	// (the host put the name there: the web chat puts the owner of the
	// session). What the client keeps per user (OAuth tokens, approved
	// tool definitions) is kept under this name. Nil, or an empty name,
	// means one user for everybody.
	UserOf func(ctx context.Context) string
	// KV keeps what the client remembers across restarts and replicas:
	// the tool definitions it pinned and the users' OAuth tokens (sealed
	// before they are written). Give it the store the conversations are
	// in (memory.MemStore, sqlitestore and pgstore implement memory.KV).
	// Nil keeps them in this process's memory only.
	KV memory.KV

	// OAuthKey is the 32-byte AES-256-GCM key the users' OAuth tokens,
	// the PKCE verifiers and a registered client's secret are sealed with
	// before they go into KV. Every replica sharing KV needs the same key.
	// New fails without one when a server uses OAuth, unless
	// InsecureOAuthPlaintext is set.
	OAuthKey []byte
	// InsecureOAuthPlaintext stores the OAuth values unsealed, for tests
	// and single-user setups whose store is as private as a key would be.
	InsecureOAuthPlaintext bool
	// OAuthRedirectURL is where authorization servers send the person
	// back: the host's route that passes the request to
	// [Client.OAuthCallback]. Needed when a server uses OAuth.
	OAuthRedirectURL string
	// OAuthWait bounds how long a call waits for the person to connect
	// (the call's own timeout bounds it too). Zero means 10 minutes.
	OAuthWait time.Duration
}

// The defaults of the zero values of Options.
const (
	defaultMaxSandboxes = 16
	defaultSandboxIdle  = 10 * time.Minute
)

// Client holds the connections to a set of MCP servers and offers their
// tools as agent tools. Its methods are safe for concurrent use.
type Client struct {
	entries []*serverEntry

	oauth *oauthStore // nil when no server uses OAuth

	mu         sync.Mutex // guards closed and registered
	closed     bool
	registered map[toolKey]string // the names the last Register gave the tools

	// regMu serializes Register and the updates of the registries it
	// filled when a server's tools change; guards regs.
	regMu sync.Mutex
	regs  map[*agent.ToolRegistry]map[toolKey]string // each registry's tools, by the name they were added under

	log *slog.Logger // Options.Logger, or a discarding one
}

// serverEntry is one configured server and what runs of it.
type serverEntry struct {
	cfg        *expanded
	red        redactor
	names      redactor // the secrets as a tool's name would hold them (nameForms)
	log        *slog.Logger
	pins       *pins // the client's, shared by its servers
	clientInfo mcp.Implementation
	// onListChanged is told of a notifications/tools/list_changed; nil for
	// a per_conversation server, whose tools are those of its probe.
	onListChanged func()

	mu        sync.Mutex  // guards converted, sig and pinned
	converted []*toolSpec // the server's tools, as last listed
	sig       string      // toolsSignature of converted
	// pinned is the pin of everybody (user ""), as last read or written:
	// the definitions the model is offered (see resolve). Nil until read.
	pinned *pinRecord
	// changed is told when a list differs from the one before it (the
	// client updates the registries Register filled); nil in tests that
	// build entries by hand.
	changed func()
	// outputs holds the compiled output schemas of the tools that declare
	// one, by MCP name; nil when none does. Guarded by mu.
	outputs map[string]*jsonschema.Schema
	// tasks holds the MCP names of the tools the server may run as tasks;
	// nil when none. Guarded by mu.
	tasks map[string]bool
	// taskPoll is how often a task is polled when its server suggests no
	// interval.
	taskPoll time.Duration

	shared *sharedServer // isolation shared
	sb     *sandboxes    // isolation per_conversation, or a connection per user with OAuth
	oauth  *oauthStore   // with OAuth; nil otherwise

	ctx    context.Context // ends when the client closes
	cancel context.CancelFunc
	relist chan struct{} // a list change to act on
	wg     sync.WaitGroup
}

// New starts the servers: it connects to each shared server and reads its
// tools, and starts each per_conversation server once to read its tools
// (that probe instance is closed again; conversations get their own on
// their first call). Servers start concurrently, each within its
// StartTimeout, and ctx bounds the whole start.
//
// New fails when a configuration is invalid, two servers have the same
// name, a referenced environment variable is unset, or a server cannot be
// started or listed; then nothing it started is left running. Close the
// Client when done with it.
func New(ctx context.Context, servers []ServerConfig, opts Options) (*Client, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxSandboxes := opts.MaxSandboxes
	if maxSandboxes <= 0 {
		maxSandboxes = defaultMaxSandboxes
	}
	idle := opts.SandboxIdle
	if idle <= 0 {
		idle = defaultSandboxIdle
	}
	info := mcp.Implementation{Name: opts.ClientName, Version: moduleVersion()}
	if info.Name == "" {
		info.Name = "planround"
	}

	// Every configuration is checked before anything is made.
	seen := make(map[string]bool)
	cfgs := make([]*expanded, len(servers))
	for i, cfg := range servers {
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("mcpclient: %w", err)
		}
		if seen[cfg.Name] {
			return nil, fmt.Errorf("mcpclient: two servers named %q", cfg.Name)
		}
		seen[cfg.Name] = true
		ex, err := expand(cfg, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: %w", err)
		}
		cfgs[i] = ex
	}

	kv := opts.KV
	if kv == nil {
		kv = new(memory.MemStore)
	}
	pins := &pins{kv: kv, userOf: opts.UserOf}
	c := &Client{log: logger}
	for _, ex := range cfgs {
		if ex.OAuth != nil && c.oauth == nil {
			var err error
			if c.oauth, err = newOAuthStore(opts, info.Name); err != nil {
				return nil, fmt.Errorf("mcpclient: %w", err)
			}
		}
	}
	for _, ex := range cfgs {
		cfg := &ex.ServerConfig
		e := &serverEntry{
			cfg:        ex,
			red:        newRedactor(ex.secrets),
			names:      newRedactor(nameForms(ex.secrets)),
			pins:       pins,
			clientInfo: info,
			relist:     make(chan struct{}, 1),
			changed:    c.toolsChanged,
		}
		e.log = serverLogger(logger, cfg.Name, e.red)
		e.ctx, e.cancel = context.WithCancel(context.Background())
		if cfg.OAuth != nil {
			e.oauth = c.oauth
			e.sb = newSandboxes(e.startInstance, maxSandboxes, idle)
		} else if cfg.isolation() == IsolationShared {
			e.shared = &sharedServer{e: e}
			e.onListChanged = e.listChanged
		} else {
			e.sb = newSandboxes(e.startInstance, maxSandboxes, idle)
		}
		c.entries = append(c.entries, e)
	}

	errs := make([]error, len(c.entries))
	var wg sync.WaitGroup
	for i, e := range c.entries {
		wg.Go(func() { errs[i] = e.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, fmt.Errorf("mcpclient: %w", err)
	}
	for _, e := range c.entries {
		// The first list of each server is pinned, unless an earlier
		// start (or another replica) pinned one; a failure is tried
		// again at the first call.
		e.pinListed(ctx)
		if e.shared != nil {
			e.wg.Go(e.watch)
		}
	}
	return c, nil
}

// pinListed pins the server's list as its first, unless it has one, and
// reads the pin the model is offered; a failure is logged, and tried again
// at the next call (until then the model reads none of the server's text).
func (e *serverEntry) pinListed(ctx context.Context) {
	if e.pins == nil {
		return
	}
	if _, err := e.pins.pinFirst(ctx, e); err != nil {
		e.log.Warn("the server's tool list could not be pinned", "err", err)
	}
}

// moduleVersion is the version of this module in the running binary.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if d.Path == "github.com/planround/planround" && d.Version != "" && d.Version != "(devel)" {
				return d.Version
			}
		}
	}
	return "devel"
}

// start connects a shared server, or probes a per_conversation one.
func (e *serverEntry) start(ctx context.Context) error {
	if e.shared != nil {
		_, err := e.shared.connect(ctx)
		return err
	}
	c, tools, err := dial(ctx, e, true)
	if err != nil && e.oauth != nil && authRequired(err) {
		// Only an authorized user may list them: the tools a user's
		// connection listed last, or until then a tool to connect.
		e.oauth.restoreTools(ctx, e)
		return nil
	}
	if err != nil {
		return err
	}
	c.close() // the probe only reads the tools
	e.setTools(tools)
	isolation := string(IsolationPerConversation)
	if e.oauth != nil {
		isolation = "per_user"
	}
	e.log.Info("server probed", "transport", string(e.cfg.transport()), "isolation", isolation, "protocol", c.protocol, "tools", len(tools))
	return nil
}

// startInstance is the starter of a per_conversation server's instances.
func (e *serverEntry) startInstance(ctx context.Context) (instance, error) {
	// A start that is under way when the client closes ends at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.ctx, cancel)()
	if e.oauth != nil {
		// A user's connection lists the tools: a server that lists them
		// only to its users gets its tools known so.
		c, tools, err := dial(ctx, e, true)
		if err != nil {
			return nil, err
		}
		e.setTools(tools)
		e.oauth.keepTools(ctx, e, tools)
		e.pinListed(ctx)
		return c, nil
	}
	c, _, err := dial(ctx, e, false)
	if err != nil {
		return nil, err
	}
	e.log.Info("conversation instance started", "pid", c.pid())
	return c, nil
}

// setTools takes tools as the server's list, and reports whether what the
// agent is offered changed (always false for the first list).
func (e *serverEntry) setTools(tools []mcp.Tool) (changed bool) {
	specs := e.convertTools(tools)
	for _, s := range specs {
		s.pinned = ptr(pinOf(s)) // once per list, not per call
	}
	var outputs map[string]*jsonschema.Schema
	var tasks map[string]bool
	for _, s := range specs {
		if s.task && !e.cfg.DisableTasks {
			if tasks == nil {
				tasks = make(map[string]bool)
			}
			tasks[s.mcpName] = true
		}
		if s.output != nil {
			if outputs == nil {
				outputs = make(map[string]*jsonschema.Schema)
			}
			outputs[s.mcpName] = s.output
		}
	}
	sig := toolsSignature(specs)
	e.mu.Lock()
	changed = e.converted != nil && sig != e.sig
	e.converted = specs
	e.outputs = outputs
	e.tasks = tasks
	e.sig = sig
	e.mu.Unlock()
	if changed && e.changed != nil {
		e.changed()
	}
	return changed
}

// toolsSignature sums up what the agent is offered of specs: a change of
// it is a change of the tools a registry holds.
func toolsSignature(specs []*toolSpec) string {
	type offered struct {
		Name, Base string
		Skip       bool
		Def        pinnedTool // description, schema and hints, as pinned (made once per list)
	}
	list := make([]offered, len(specs))
	for i, s := range specs {
		list[i] = offered{s.mcpName, s.base, s.skip, pinnedOf(s)}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "" // never equal to a listed signature: counts as changed
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// outputSchema returns the compiled output schema of the tool mcpName, or
// nil when it declares none (or one that could not be compiled).
func (e *serverEntry) outputSchema(mcpName string) *jsonschema.Schema {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outputs[mcpName]
}

// listChanged notes a notifications/tools/list_changed; watch acts on it.
// It never blocks: it runs on a transport's reader.
func (e *serverEntry) listChanged() {
	select {
	case e.relist <- struct{}{}:
	default:
	}
}

// watch reads a shared server's tools again after it said they changed,
// until the client closes.
func (e *serverEntry) watch() {
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.relist:
		}
		c := e.shared.current()
		if c == nil {
			continue // the next connection reads the list anyway
		}
		ctx, cancel := context.WithTimeout(e.ctx, e.cfg.startTimeout())
		tools, err := c.listTools(ctx)
		cancel()
		if err != nil {
			e.log.Warn("reading the changed tool list failed", "err", err)
			continue
		}
		if e.setTools(tools) {
			e.log.Info("tool list changed", "tools", len(tools))
		} else {
			// A list read again with nothing changed for the agent: after
			// a subscription's acknowledgement, or a change the agent is
			// not offered.
			e.log.Debug("tool list read again, unchanged", "tools", len(tools))
		}
	}
}

// call runs a tool of the server, bounded by the call timeout.
func (e *serverEntry) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	if d := e.cfg.callTimeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, callTimeoutError(d))
		defer cancel()
	}
	if progress != nil && e.red.secretSet != nil {
		rp := newRedactingProgress(progress, e.red)
		// Before the call returns, also when it was interrupted: the agent
		// takes the partial output once Execute has returned.
		defer rp.end()
		progress = rp
	}
	var out string
	var err error
	if e.shared != nil {
		out, err = e.shared.call(ctx, tool, args, progress)
	} else if e.oauth != nil {
		out, err = e.userCall(ctx, tool, args, progress)
	} else {
		out, err = e.conversationCall(ctx, tool, args, progress)
	}
	if err != nil {
		var te toolError
		if errors.As(err, &te) {
			return "", errors.New(e.red.String(string(te)))
		}
		return "", e.wrap(err)
	}
	return e.red.String(out), nil
}

// callTimeoutError is why a call ended at the call timeout: a type, so
// that a call does not format an error it seldom needs.
type callTimeoutError time.Duration

func (d callTimeoutError) Error() string {
	return fmt.Sprintf("no result within the call timeout of %s", time.Duration(d))
}

// conversationCall runs a tool on the instance of the call's conversation:
// the session's, or for a call of a nested run (a sub-agent's) one of its
// own, which ends with that run.
func (e *serverEntry) conversationCall(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	call, _ := agent.CallFromContext(ctx)
	conv := call.Conversation()
	if conv == "" {
		return "", errors.New("this server runs one instance per conversation, and the call belongs to none (the run has no session id)")
	}
	if call.Parent != nil {
		// Registered by every call of the run; ending a conversation that
		// has no instance (any more) does nothing.
		agent.AfterSubAgent(ctx, func() { _ = e.sb.closeConversation(conv) })
	}
	inst, release, err := e.sb.get(ctx, conv)
	if err != nil {
		return "", err
	}
	out, err := inst.call(ctx, tool, args, progress)
	release()
	// A broken instance is ended by discard, which leaves a newer instance
	// of the conversation alone: another call may have seen the loss first
	// and started one.
	if errors.Is(err, errNotSent) {
		// It died since the conversation's last call (a crash while idle):
		// once more, on a fresh one.
		e.sb.discard(conv, inst)
		if inst, release, err = e.sb.get(ctx, conv); err != nil {
			return "", err
		}
		out, err = inst.call(ctx, tool, args, progress)
		release()
	}
	if errors.Is(err, errLost) && !errors.Is(err, errClosed) {
		// It died during the call: the conversation's next call starts
		// a fresh one. (One closed on purpose is gone already.)
		e.sb.discard(conv, inst)
	}
	return out, err
}

// close ends everything of the server.
func (e *serverEntry) close() error {
	e.cancel() // starts under way end
	var err error
	if e.shared != nil {
		err = e.shared.close()
	} else {
		err = e.sb.close()
	}
	// After shared.close nothing adds to wg: connect sees the client closed.
	e.wg.Wait()
	return err
}

// wrap makes err an error of this server, with secrets redacted.
func (e *serverEntry) wrap(err error) error {
	var se *serverError
	if errors.As(err, &se) {
		return err
	}
	return &serverError{name: e.cfg.Name, red: e.red, err: err}
}

// serverError is an error of one server. Its text names the server and
// holds no secret.
type serverError struct {
	name string
	red  redactor
	err  error
}

func (e *serverError) Error() string {
	return e.red.String(fmt.Sprintf("mcp server %q: %v", e.name, e.err))
}

func (e *serverError) Unwrap() error { return e.err }

// CloseConversation ends the instances that per_conversation servers run
// for the conversation with that session id, if any: a host calls it when
// a conversation ends, rather than wait for the idle time. A later call of
// the conversation starts a fresh instance. The instances of its
// sub-agents' runs end with those runs.
func (c *Client) CloseConversation(sessionID string) {
	for _, e := range c.entries {
		if e.sb != nil {
			e.sb.closeConversation(sessionID)
		}
	}
}

// Close ends every connection and instance, and every process a stdio
// server started (its whole process group and, on Linux where the host may
// make cgroups, its cgroup), and waits for them. Calls
// still running fail. It returns an error only when a process could not be
// ended. Calling Close again does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	errs := make([]error, len(c.entries))
	var wg sync.WaitGroup
	for i, e := range c.entries {
		wg.Go(func() { errs[i] = e.close() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mcpclient: %w", err)
	}
	return nil
}

// State is the state of a server, as [Client.Servers] reports it.
type State string

// The states of a server.
const (
	// StateConnected: a shared server is connected.
	StateConnected State = "connected"
	// StateConnecting: a shared server is being connected again.
	StateConnecting State = "connecting"
	// StateDown: a shared server's connection was lost, or could not be
	// opened again; the next call tries again (after a pause that grows
	// with each failure), and calls fail at once meanwhile.
	StateDown State = "down"
	// StateOnDemand: a per_conversation server, whose instances start on
	// each conversation's first call.
	StateOnDemand State = "on_demand"
	// StateClosed: the Client was closed.
	StateClosed State = "closed"
)

// ServerStatus describes a server, for a host to show.
type ServerStatus struct {
	Name      string    `json:"name"`
	Transport Transport `json:"transport"`
	Isolation Isolation `json:"isolation"`
	State     State     `json:"state"`
	// Tools are the names the server's tools are offered under: the names
	// [Client.Register] added them under (<server>__<tool> where the
	// registry had the name already), and for a tool not registered (no
	// Register yet, or a tool the server listed since) its name in
	// [Client.Tools].
	Tools []string `json:"tools"`
	// Unapproved are the tools of Tools whose definition, as the server
	// lists it now, is not the one pinned for everybody: changed since, or
	// added since (see the package documentation). The model is offered
	// the pinned definition, or none of the server's text, and a call
	// asks a person, who sees the change.
	Unapproved []string `json:"unapproved,omitempty"`
	// PID is the process id of a shared stdio server; 0 otherwise.
	PID int `json:"pid,omitempty"`
	// Instances is the number of conversations a per_conversation server
	// runs an instance for.
	Instances int `json:"instances,omitempty"`
	// Error says why a shared server is down, without secrets.
	Error string `json:"error,omitempty"`
}

// Servers reports each server's state and tools, in configuration order.
func (c *Client) Servers() []ServerStatus {
	c.mu.Lock()
	closed, registered := c.closed, c.registered
	c.mu.Unlock()
	names := make(map[*serverEntry][]string)
	unapproved := make(map[*serverEntry][]string)
	for _, t := range c.resolve() {
		name := t.def.Name
		if n, ok := registered[toolKey{t.e, t.mcpName}]; ok {
			name = n
		}
		names[t.e] = append(names[t.e], name)
		if t.unapproved {
			unapproved[t.e] = append(unapproved[t.e], name)
		}
	}
	out := make([]ServerStatus, 0, len(c.entries))
	for _, e := range c.entries {
		st := ServerStatus{
			Name:       e.cfg.Name,
			Transport:  e.cfg.transport(),
			Isolation:  e.cfg.isolation(),
			Tools:      names[e],
			Unapproved: unapproved[e],
			State:      StateOnDemand,
		}
		if st.Tools == nil {
			st.Tools = []string{}
		}
		if e.shared != nil {
			var err error
			st.State, st.PID, err = e.shared.status()
			if err != nil {
				st.Error = e.wrap(err).Error()
			}
		} else {
			st.Instances = e.sb.stats().Live
		}
		if closed {
			st.State, st.PID = StateClosed, 0
		}
		out = append(out, st)
	}
	return out
}

// The pauses between attempts to connect a shared server again: the first
// attempt after a loss is at once, and each failure doubles the pause.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// sharedServer is the one connection of a shared server. It is opened at
// start-up and again, lazily, on the first call after it was lost.
type sharedServer struct {
	e *serverEntry

	mu         sync.Mutex    // guards the fields below
	conn       *conn         // nil while down
	connecting chan struct{} // closed when the connection under way is done; nil when none is
	err        error         // why it is down
	retryAt    time.Time     // no attempt before
	backoff    time.Duration // the pause after the next failure, halved
	closed     bool
}

// current is the live connection, or nil.
func (s *sharedServer) current() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.isLost() {
		return nil
	}
	return s.conn
}

func (s *sharedServer) status() (State, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return StateClosed, 0, nil
	case s.connecting != nil:
		return StateConnecting, 0, s.err
	case s.conn != nil && !s.conn.isLost():
		return StateConnected, s.conn.pid(), nil
	case s.conn != nil:
		return StateDown, 0, s.conn.lostErr
	}
	return StateDown, 0, s.err
}

func (s *sharedServer) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return "", err
	}
	out, err := c.call(ctx, tool, args, progress)
	if errors.Is(err, errNotSent) {
		// The server died while idle, unnoticed until now: once more, on
		// a fresh connection.
		if c, err = s.connect(ctx); err != nil {
			return "", err
		}
		out, err = c.call(ctx, tool, args, progress)
	}
	return out, err
}

// connect returns the live connection, opening it when there is none and
// the pause after the last failure is over; otherwise it fails at once.
// Concurrent callers wait for one attempt.
func (s *sharedServer) connect(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("the client is closed")
		}
		if c := s.conn; c != nil {
			if !c.isLost() {
				s.mu.Unlock()
				return c, nil
			}
			// Lost since the last call: try again at once.
			s.conn, s.err, s.retryAt = nil, c.lostErr, time.Time{}
			s.e.log.Warn("connection lost", "err", c.lostErr)
			s.e.wg.Go(func() { c.close() })
		}
		if ch := s.connecting; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		if wait := time.Until(s.retryAt); wait > 0 {
			err := fmt.Errorf("the server is down (%w); the next attempt to connect is in %s", s.err, wait.Round(100*time.Millisecond))
			s.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		s.connecting = ch
		s.mu.Unlock()

		c, tools, err := s.dial(ctx)

		s.mu.Lock()
		s.connecting = nil
		close(ch)
		if s.closed {
			s.mu.Unlock()
			if c != nil {
				c.close()
			}
			return nil, errors.New("the client is closed")
		}
		if err != nil {
			if ctx.Err() == nil { // a failure of the server, not a caller that gave up
				s.backoff = min(max(2*s.backoff, minBackoff), maxBackoff)
				s.retryAt = time.Now().Add(s.backoff)
			}
			s.err = err
			s.mu.Unlock()
			return nil, err
		}
		reconnect := s.err != nil
		s.conn, s.err, s.backoff = c, nil, 0
		s.mu.Unlock()
		s.e.setTools(tools)
		c.tookList()
		if reconnect {
			s.e.log.Info("server reconnected", "pid", c.pid(), "tools", len(tools))
		} else {
			s.e.log.Info("server connected", "transport", string(s.e.cfg.transport()), "protocol", c.protocol, "pid", c.pid(), "tools", len(tools))
		}
		return c, nil
	}
}

// dial opens a connection, ending at once when the client closes.
func (s *sharedServer) dial(ctx context.Context) (*conn, []mcp.Tool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.e.ctx, cancel)()
	return dial(ctx, s.e, true)
}

// close ends the connection and waits for one under way.
func (s *sharedServer) close() error {
	s.mu.Lock()
	s.closed = true
	c, ch := s.conn, s.connecting
	s.conn = nil
	s.mu.Unlock()
	if ch != nil {
		<-ch // it ends at once: the client's context is cancelled
	}
	if c != nil {
		return c.close()
	}
	return nil
}

// redactHandler is a slog.Handler that redacts secrets from the message and
// the attributes of records before its handler sees them.
type redactHandler struct {
	h   slog.Handler
	red redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.red.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(out), red: h.red}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), red: h.red}
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.red.String(v.String()))
	case slog.KindAny:
		return slog.String(a.Key, h.red.String(fmt.Sprint(v.Any())))
	case slog.KindGroup:
		group := v.Group()
		out := make([]any, len(group))
		for i, g := range group {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	}
	return slog.Attr{Key: a.Key, Value: v}
}
