package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/procgroup"
)

// instance is one running MCP server: a connected client and, for stdio,
// the process group the server runs in.
type instance interface {
	// call runs a tool and returns the text the model reads. A tool's
	// error result is an error whose text is the result's. It returns
	// when ctx ends, whatever the server does.
	call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error)
	// close ends the connection and, for stdio, kills the whole process
	// group. It is idempotent.
	close() error
	// pid is the stdio server's process id (0 for a remote server).
	pid() int
}

// starter starts a fresh instance of one server configuration. ctx bounds
// the start only: the instance lives until its close.
type starter func(ctx context.Context) (instance, error)

// errLost is wrapped by the errors of calls that failed because the
// connection to the server is gone (the process exited, the stream broke):
// the instance is of no further use.
var errLost = errors.New("connection lost")

// errNotSent is wrapped by the errors of calls that failed because the
// connection was found lost before the request went out: the call may be
// made again on a fresh connection.
var errNotSent = errors.New("the request was not sent")

// errClosed is why the connection of an instance that was closed is lost.
var errClosed = errors.New("the connection was closed")

// The bounds of a stdio server's shutdown: how long it has to exit after
// its input is closed, then after SIGTERM, then after SIGKILL.
const (
	exitGrace = 500 * time.Millisecond
	termGrace = 500 * time.Millisecond
	killGrace = 2 * time.Second
	// outputGrace is how long the end of a stdio server's output and its
	// exit wait for each other, so that the error says how it ended.
	outputGrace = 200 * time.Millisecond
	// replyGrace is how long a call whose connection was lost waits for a
	// reply that was read before the loss.
	replyGrace = 100 * time.Millisecond
)

// discoverTimeout bounds the server/discover request that opens a
// connection at protocol 2026-07-28: a server that ignores requests it does
// not know would otherwise hold the start for mcp-go's default of 5 seconds
// before the client falls back to the initialize handshake.
const discoverTimeout = time.Second

// maxMessage bounds one message from a stdio server. A larger one ends the
// connection instead of growing the client's memory.
const maxMessage = 32 << 20

// conn is an [instance] over mcp-go.
type conn struct {
	e        *serverEntry
	mc       *client.Client
	proc     *process     // stdio only
	hc       *http.Client // sse and http only
	cancel   context.CancelFunc
	protocol string
	caps     mcp.ServerCapabilities // what the server declared in the handshake

	lost     chan struct{} // closed when the connection is gone
	lostOnce sync.Once
	lostErr  error // why; written before lost is closed

	progMu   sync.Mutex // guards progress
	progress map[string]agent.Progress
	seq      atomic.Uint64

	mu      sync.Mutex // guards closing and the Add of calls
	closing bool
	calls   sync.WaitGroup // the calls in flight, each on a caller
	next    chan func()    // hands a call to an idle caller
	callers sync.WaitGroup // the callers (see runCall)

	scopeMu sync.Mutex // guards scope
	scope   []string   // what a 403 insufficient_scope asked for; nil before one
	elicit  *elicitor  // answers the server's requests for input

	stopListen func()     // ends the subscription to list changes; nil without one
	subMu      sync.Mutex // guards acked and took
	acked      bool       // the server acknowledged the subscription
	took       bool       // the entry took this connection's tool list (tookList)
	closeOnce  sync.Once
	closeErr   error
}

func newConn(e *serverEntry) *conn {
	return &conn{e: e, lost: make(chan struct{}), progress: make(map[string]agent.Progress), next: make(chan func())}
}

// dial starts the server of e and opens a connection to it: the process or
// the HTTP client, the handshake, bounded by e's start timeout and ctx.
//
// With list set, it also reads the server's tools (all pages), within the
// same bound.
func dial(ctx context.Context, e *serverEntry, list bool) (_ *conn, tools []mcp.Tool, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, e.cfg.startTimeout(),
		fmt.Errorf("no answer within the start timeout of %s", e.cfg.startTimeout()))
	defer cancel()

	c := newConn(e)
	life, stop := context.WithCancel(context.Background())
	c.cancel = stop
	defer func() {
		if err != nil {
			if c.isLost() { // the process exited, or wrote too much
				err = c.lostErr
			} else {
				err = startError(ctx, err)
			}
			c.close()
			err = e.wrap(err)
		}
	}()

	var tr transport.Interface
	switch e.cfg.transport() {
	case TransportStdio:
		c.proc, err = startProcess(e, c.markLost)
		if err != nil {
			return nil, nil, err
		}
		tr = transport.NewIO(c.proc.stdout, c.proc.stdin, nil)
	case TransportSSE:
		c.hc = newHTTPClient()
		var sse *transport.SSE
		sse, err = transport.NewSSE(e.cfg.URL,
			transport.WithHeaders(e.cfg.Headers),
			transport.WithHTTPClient(c.hc),
			transport.WithResponseTimeout(24*time.Hour), // the call's context bounds it
			transport.WithEndpointTimeout(e.cfg.startTimeout()),
			transport.WithSSELogger(e.log))
		tr = &cancelling{Interface: sse, HTTPConnection: sse, always: true}
	case TransportHTTP:
		c.hc = newHTTPClient()
		hopts := []transport.StreamableHTTPCOption{
			transport.WithHTTPHeaders(e.cfg.Headers),
			transport.WithHTTPBasicClient(c.hc),
			transport.WithHTTPLogger(e.log),
		}
		if user, ok := ctx.Value(oauthUserKey{}).(string); ok && e.oauth != nil {
			// A user's connection: the user's token on every request.
			creds, cerr := e.oauth.client(ctx, e)
			if cerr != nil {
				return nil, nil, cerr
			}
			store := &kvTokenStore{s: e.oauth, key: tokenKey(e.cfg.Name, user)}
			c.hc.Transport = &scopeWatch{rt: c.hc.Transport, c: c}
			hopts = append(hopts, transport.WithHTTPOAuth(e.oauth.config(e, creds, store, e.cfg.OAuth.Scopes)))
		}
		var h *transport.StreamableHTTP
		h, err = transport.NewStreamableHTTP(e.cfg.URL, hopts...)
		tr = &cancelling{Interface: h, HTTPConnection: h}
	}
	if err != nil {
		return nil, nil, err
	}

	opts := []client.ClientOption{client.WithDiscoverTimeout(discoverTimeout)}
	version := e.cfg.ProtocolVersion
	if version == "" && e.cfg.transport() == TransportSSE {
		// The SSE transport belongs to the protocol versions before
		// 2026-07-28, and on them a server's notifications come on its
		// stream without a subscription.
		version = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	}
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	opts = append(opts, c.elicitationOptions()...)
	c.mc = client.NewClient(tr, opts...)
	c.mc.OnNotification(c.notify)
	c.mc.OnConnectionLost(func(err error) { c.markLost(fmt.Errorf("the event stream ended: %w", err)) })
	// The transport keeps life for the connection's lifetime (the SSE
	// stream, requests from the server), so it is not ctx; ending life ends
	// a start that outlasts ctx (an SSE server that never sends its
	// endpoint).
	started := make(chan error, 1)
	go func() { started <- c.mc.Start(life) }()
	select {
	case err = <-started:
	case <-ctx.Done():
		stop()
		<-started
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, err
	}
	var req mcp.InitializeRequest
	req.Params.ClientInfo = e.clientInfo
	req.Params.ProtocolVersion = version
	res, err := c.mc.Initialize(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	c.protocol = res.ProtocolVersion
	c.caps = res.Capabilities
	if res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged && mcp.IsModernProtocol(res.ProtocolVersion) && e.onListChanged != nil {
		// At protocol 2026-07-28 a server sends list changes only on a
		// subscription; earlier ones send them unasked (except over
		// streamable HTTP without a standing GET stream, where they are
		// lost).
		//
		// A change made after the list below was read but before the
		// server established the subscription would be heard by nobody:
		// once the server acknowledged it, the list is read again (see
		// listenAcknowledged).
		c.stopListen, err = c.mc.ListenAsync(life, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) {
			e.log.Debug("the subscription to tool list changes ended", "err", err)
		})
		if err != nil {
			e.log.Debug("no subscription to tool list changes", "err", err)
		}
	}
	if list && res.Capabilities.Tools != nil {
		// A server that declared no tools has none to list.
		tools, err = c.listTools(ctx)
		if err != nil {
			return nil, nil, err
		}
	}
	return c, tools, nil
}

// startError says why a start failed: the start timeout rather than a
// bare "context deadline exceeded".
func startError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.DeadlineExceeded {
		return cause
	}
	return err
}

func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// listTools returns all the server's tools, following the pages.
func (c *conn) listTools(ctx context.Context) ([]mcp.Tool, error) {
	res, err := c.mc.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the tools: %w", err)
	}
	return res.Tools, nil
}

func (c *conn) pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// markLost records that the connection is gone, and why; the first reason
// stays.
func (c *conn) markLost(err error) {
	c.lostOnce.Do(func() {
		c.lostErr = err
		close(c.lost)
	})
}

// isLost reports whether the connection is gone.
func (c *conn) isLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// lostError is the error of a call cut by the loss of the connection.
func (c *conn) lostError() error {
	return fmt.Errorf("%w: %w", errLost, c.lostErr)
}

// notify handles a notification from the server. Over stdio it runs on the
// transport's reader, so it must not block.
func (c *conn) notify(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		fields := n.Params.AdditionalFields
		token := progressToken(fields["progressToken"])
		c.progMu.Lock()
		p := c.progress[token]
		c.progMu.Unlock()
		switch p := p.(type) {
		case lineWriter:
			p.writeLine(progressLine(fields))
		case nil:
		default:
			p.WriteString(progressLine(fields) + "\n")
		}
	case mcp.MethodNotificationToolsListChanged:
		if c.e.onListChanged != nil {
			c.e.onListChanged()
		}
	case mcp.MethodNotificationSubscriptionsAcknowledged:
		c.listenAcknowledged()
	}
}

// listenAcknowledged handles the server's acknowledgement of the
// subscription to tool list changes (notifications/subscriptions/
// acknowledged, which the protocol has a server send before anything else
// of the subscription, once it is established). From then on a change is
// notified; one made since the list of the handshake was read is not, so
// the list is read again, the way a list change has it read. That is done
// once the entry took the connection's first list (tookList), so that the
// newer list is the one that stays.
func (c *conn) listenAcknowledged() {
	c.subMu.Lock()
	c.acked = true
	relist := c.took
	c.subMu.Unlock()
	if relist && c.e.onListChanged != nil {
		c.e.onListChanged()
	}
}

// tookList notes that the entry took the tool list read on connecting; if
// the server acknowledged the subscription before, the list is read again
// (see listenAcknowledged).
func (c *conn) tookList() {
	c.subMu.Lock()
	c.took = true
	relist := c.acked
	c.subMu.Unlock()
	if relist && c.e.onListChanged != nil {
		c.e.onListChanged()
	}
}

// progressToken is the text of a progress token, a string or a number.
func progressToken(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// progressLine is the partial output shown for a progress notification: its
// message, or "step i/N" without one.
func progressLine(fields map[string]any) string {
	if m, ok := fields["message"].(string); ok && m != "" {
		return m
	}
	line := "step " + number(fields["progress"])
	if total := number(fields["total"]); total != "" {
		line += "/" + total
	}
	return line
}

// number formats a progress value: a float64 over the wire, an int or
// another number type from an in-process server.
func number(v any) string {
	switch n := v.(type) {
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(n), 'f', -1, 32)
	case int:
		return strconv.Itoa(n)
	case int64:
		return strconv.FormatInt(n, 10)
	case json.Number:
		return n.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

type callReply struct {
	res *mcp.CallToolResult
	err error
}

func (c *conn) call(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, error) {
	if taskID, err := c.resumedTask(ctx, tool); err != nil || taskID != "" {
		if err != nil {
			return "", err
		}
		return c.taskCall(ctx, tool, args, progress, taskID)
	}
	if c.taskTool(tool) {
		return c.taskCall(ctx, tool, args, progress, "")
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	if progress != nil {
		token := "planround-" + strconv.FormatUint(c.seq.Add(1), 10)
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
		c.progMu.Lock()
		c.progress[token] = progress
		c.progMu.Unlock()
		defer func() {
			c.progMu.Lock()
			delete(c.progress, token)
			c.progMu.Unlock()
		}()
	}
	req.Params.Meta = withTraceContext(ctx, req.Params.Meta)

	c.mu.Lock()
	if c.closing || c.isLost() {
		c.mu.Unlock()
		return "", fmt.Errorf("%w: %w", errNotSent, c.lostError())
	}
	c.calls.Add(1)
	c.mu.Unlock()
	// The call runs in a goroutine of its own, so that it returns when ctx
	// ends or the connection is lost even if the transport waits on: an SSE
	// post whose answer never comes, a server that never reads.
	// The call's own context has no deadline, only ctx's end: a
	// transport's timer set from the deadline (SSE's) would race with it
	// and make a timeout look like a broken connection. It ends with the
	// call, and what the transport tied to it with it.
	callCtx, stop := context.WithCancel(noDeadline{ctx})
	callCtx, declined := c.elicit.withDeclines(callCtx, tool)
	done := make(chan callReply, 1)
	untrack := c.elicit.track(callCtx)
	c.runCall(func() {
		defer c.calls.Done()
		defer stop()
		defer untrack()
		res, err := c.mc.CallTool(callCtx, req)
		done <- callReply{res, err}
	})
	select {
	case r := <-done:
		return declined.explain(c.reply(ctx, tool, r))
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case <-c.lost:
		// A reply read before the end of the stream wins over the loss.
		select {
		case r := <-done:
			return declined.explain(c.reply(ctx, tool, r))
		case <-time.After(replyGrace):
			return "", c.lostError()
		}
	}
}

// noDeadline is a context that ends when its parent does but has no
// deadline, so that a transport sets no timer of its own. (A context made
// by context.WithoutCancel and ended by context.AfterFunc would do the
// same with more allocations.)
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// callerIdle is how long a caller waits for another call before it ends.
const callerIdle = time.Second

// runCall runs f, a call, on a goroutine other than the caller's: on a
// caller of c that is waiting for work, or a new one. A caller waits a
// while for the next call after each one, so that calls in quick
// succession reuse the stack it grew: mcp-go's path of a call is deep, and
// a fresh goroutine per call spent several percent of an in-process call's
// CPU time growing its stack (BenchmarkMCPCall). Callers end after
// callerIdle without a call, and when the connection is lost or closed.
func (c *conn) runCall(f func()) {
	select {
	case c.next <- f:
	default:
		c.callers.Go(func() { c.caller(f) })
	}
}

func (c *conn) caller(f func()) {
	idle := time.NewTimer(callerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(callerIdle)
		select {
		case f = <-c.next:
		case <-idle.C:
			return
		case <-c.lost:
			return
		}
	}
}

func (c *conn) reply(ctx context.Context, tool string, r callReply) (string, error) {
	if r.err != nil {
		return "", c.callError(ctx, r.err)
	}
	if s := c.e.outputSchema(tool); s != nil && r.res != nil && !r.res.IsError {
		return structuredText(tool, s, r.res, c.e.red)
	}
	text, isErr := resultText(r.res, c.e.red)
	if isErr {
		return "", toolError(text)
	}
	return text, nil
}

// toolError is a tool's error result: what went wrong in the server's
// words, for the model.
type toolError string

func (e toolError) Error() string { return string(e) }

// callError classifies the error of a call that did not get a result.
func (c *conn) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if errors.Is(err, syscall.EPIPE) {
		// The server's input is closed: it died before the request was
		// written, so the request can go to a fresh instance.
		c.markLost(err)
		return fmt.Errorf("%w: %w", errNotSent, c.lostError())
	}
	if c.isLost() {
		return c.lostError()
	}
	var te *transport.Error
	if errors.As(err, &te) || errors.Is(err, transport.ErrTransportClosed) {
		// The request did not get through or its answer did not come
		// back: the connection is not to be trusted any more. A shared
		// server reconnects on the next call.
		c.markLost(err)
		return c.lostError()
	}
	return err
}

// close ends the connection; for stdio it ends the process group.
func (c *conn) close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.markLost(errClosed)
		if c.stopListen != nil {
			c.stopListen()
		}
		if c.mc != nil {
			_ = c.mc.Close() // its errors are about a connection we are leaving
		}
		if c.proc != nil {
			c.closeErr = c.proc.stop()
		}
		c.cancel()
		c.calls.Wait()
		c.callers.Wait() // each ends after its call: lost is closed
		if c.hc != nil {
			c.hc.CloseIdleConnections()
		}
	})
	return c.closeErr
}

// process is a stdio server's process. It runs in a process group of its
// own, so that what it starts (the real server behind a wrapper such as sh
// or npx) ends with it, and, on Linux, that group dies with this process;
// where this process may make cgroups, in a cgroup of its own too, which
// reaches what left the group (see package procgroup).
type process struct {
	e      *serverEntry
	cmd    *exec.Cmd
	group  *procgroup.Group
	stdin  *os.File // our end of its standard input
	stdout *limitReader
	stderr *os.File // our end of its standard error

	exited  chan struct{} // closed when the process has been waited for
	exitErr error         // written before exited is closed
	logged  chan struct{} // closed when its standard error has been read to the end

	mu   sync.Mutex // guards last
	last string     // the last line it wrote to its standard error
}

func (p *process) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// startProcess starts the stdio server of e. onExit is told when the
// process exits or its output ends.
func startProcess(e *serverEntry, onExit func(error)) (_ *process, err error) {
	cmd := exec.Command(e.cfg.Command, e.cfg.Args...)
	cmd.Dir = e.cfg.Dir
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(e.cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+e.cfg.Env[k])
	}

	// Plain pipes rather than exec's: exec closes its pipes when the
	// process is waited for, which could lose the last message of a server
	// that answers and exits; and with files as its standard streams the
	// child's output needs no copying goroutine that a grandchild holding
	// the pipe open could keep alive.
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	group, err := procgroup.Start(cmd)
	if err != nil {
		return nil, err
	}
	// The child has its ends now.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{e: e, cmd: cmd, group: group, stdin: inW, stderr: errR, exited: make(chan struct{}), logged: make(chan struct{})}
	p.stdout = &limitReader{f: outR, max: maxMessage, p: p, onEnd: onExit, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		// What it wrote last to its standard error often says why.
		select {
		case <-p.logged:
		case <-time.After(outputGrace):
		}
		if last := p.lastLine(); last != "" {
			p.exitErr = fmt.Errorf("the server exited (%w): %s", err, last)
		} else {
			p.exitErr = fmt.Errorf("the server exited (%w)", err)
		}
		close(p.exited)
		// The end of its output, which comes after every message it
		// wrote, ends the connection; a grandchild that keeps the output
		// open must not keep it going.
		select {
		case <-p.stdout.done:
		case <-time.After(outputGrace):
			onExit(p.exitErr)
		}
	}()
	go p.logStderr()
	return p, nil
}

// logStderr logs what the server writes to its standard error, a line a
// record, at debug level; a line too long is logged in part.
func (p *process) logStderr() {
	defer close(p.logged)
	r := bufio.NewReaderSize(p.stderr, maxStderrLine)
	long := false // in the rest of a line too long to log whole
	for {
		line, err := r.ReadSlice('\n')
		if !long {
			if err == bufio.ErrBufferFull {
				// The logged part ends before a secret that the rest
				// of the line would finish: the record would show its
				// first part.
				line = line[:p.e.red.settled(string(line))]
			}
			p.logLine(line)
		}
		long = err == bufio.ErrBufferFull
		if err != nil && !long {
			return
		}
	}
}

const maxStderrLine = 4096

func (p *process) logLine(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	p.mu.Lock()
	p.last = string(line)
	p.mu.Unlock()
	p.e.log.Debug("server stderr", "line", string(line))
}

// stop ends the process group: it closes the server's input, which a
// server takes as the end of the session (and its output, so that a server
// writing to it is not held), then sends SIGTERM and finally
// SIGKILL to the whole group, each after a short grace. The group (and the
// server's cgroup) is killed at the end in any case, so that nothing the
// server started survives it.
func (p *process) stop() error {
	p.stdin.Close()
	p.stdout.f.Close() // a server blocked writing to us is released
	var err error
	select {
	case <-p.exited:
	case <-time.After(exitGrace):
		p.group.Terminate()
		select {
		case <-p.exited:
		case <-time.After(termGrace):
			p.group.Kill()
			select {
			case <-p.exited:
			case <-time.After(killGrace):
				err = fmt.Errorf("the server (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
			}
		}
	}
	p.group.Kill()
	p.stderr.Close()
	if err == nil {
		<-p.logged
	}
	return err
}

// limitReader is a stdio server's output as the transport reads it: it ends
// the stream (io.EOF) when one message grows beyond max bytes, so that a
// server writing without end cannot grow the client's memory, and it tells
// onEnd when the stream ends.
type limitReader struct {
	f     *os.File
	max   int
	n     int // bytes since the last newline
	p     *process
	onEnd func(error)
	ended bool
	done  chan struct{} // closed when the stream has ended
}

func (r *limitReader) Read(b []byte) (int, error) {
	if r.ended {
		return 0, io.EOF
	}
	if len(b) > r.max-r.n+1 {
		b = b[:r.max-r.n+1]
	}
	n, err := r.f.Read(b)
	if i := bytes.LastIndexByte(b[:n], '\n'); i >= 0 {
		r.n = n - i - 1
	} else {
		r.n += n
	}
	if r.n > r.max {
		r.end(fmt.Errorf("the server sent a message larger than %d MiB", r.max>>20))
		return 0, io.EOF
	}
	if err != nil {
		// The process closed its output: it exited, or is about to.
		// Its exit status says more than the end of the stream.
		select {
		case <-r.p.exited:
			r.end(r.p.exitErr)
		case <-time.After(outputGrace):
			r.end(errors.New("the server closed its output"))
		}
		return n, io.EOF
	}
	return n, nil
}

func (r *limitReader) end(err error) {
	r.ended = true
	r.onEnd(err)
	close(r.done)
}

// serverLogger is the logger of one server: base with the server's name,
// and its secrets redacted.
func serverLogger(base *slog.Logger, name string, red redactor) *slog.Logger {
	if red.secretSet != nil {
		base = slog.New(&redactHandler{h: base.Handler(), red: red})
	}
	return base.With("mcp_server", name)
}

// cancelling is an HTTP transport that tells the server when a request is
// given up. mcp-go sends notifications/cancelled only over stdio, taking
// the end of the request's stream as the cancellation over HTTP; that holds
// for streamable HTTP at protocol 2026-07-28, but over SSE, and over
// streamable HTTP at earlier versions, servers keep working on a request
// nobody waits for (mcp-go's own SSE server never stops the handler) unless
// they are told.
type cancelling struct {
	transport.Interface
	transport.HTTPConnection
	always bool // SSE: tell the server whatever the protocol version

	version atomic.Value // the negotiated protocol version, a string
}

// Start, Close and the other methods of both embedded interfaces are the
// same transport's; these resolve the ambiguity.

func (t *cancelling) Start(ctx context.Context) error { return t.Interface.Start(ctx) }

func (t *cancelling) Close() error { return t.Interface.Close() }

func (t *cancelling) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.Interface.SendNotification(ctx, n)
}

func (t *cancelling) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.Interface.SetNotificationHandler(h)
}

func (t *cancelling) GetSessionId() string { return t.Interface.GetSessionId() }

func (t *cancelling) SetProtocolVersion(v string) {
	t.version.Store(v)
	t.HTTPConnection.SetProtocolVersion(v)
}

// SetRequestHandler passes the handler of the server's requests (pings,
// roots) on.
func (t *cancelling) SetRequestHandler(h transport.RequestHandler) {
	if b, ok := t.Interface.(transport.BidirectionalInterface); ok {
		b.SetRequestHandler(h)
	}
}

// SetConnectionLostHandler passes the handler of a broken event stream on.
func (t *cancelling) SetConnectionLostHandler(h func(error)) {
	if s, ok := t.Interface.(interface{ SetConnectionLostHandler(func(error)) }); ok {
		s.SetConnectionLostHandler(h)
	}
}

// cancelTimeout bounds sending a notifications/cancelled.
const cancelTimeout = 2 * time.Second

func (t *cancelling) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	res, err := t.Interface.SendRequest(ctx, req)
	if err == nil || ctx.Err() == nil {
		return res, err
	}
	v, _ := t.version.Load().(string)
	if v == "" || req.Method == string(mcp.MethodInitialize) || req.Method == string(mcp.MethodServerDiscover) ||
		(!t.always && mcp.IsModernProtocol(v)) {
		return res, err
	}
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": ctx.Err().Error()}},
		},
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	_ = t.Interface.SendNotification(nctx, n) // best effort
	return res, err
}
