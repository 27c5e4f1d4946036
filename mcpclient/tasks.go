package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planround/planround/agent"
)

// defaultTaskPoll is how often a task is polled when its server suggests no
// interval.
const defaultTaskPoll = time.Second

// taskCancelTimeout bounds the tasks/cancel of an interrupted call.
const taskCancelTimeout = 2 * time.Second

// taskCreateTimeout bounds the creation of a task once the call was
// interrupted or not: the request that makes it is not cut by the call's
// context (see taskCall).
const taskCreateTimeout = 30 * time.Second

// errTaskCreateTimeout ends a task creation that took taskCreateTimeout.
var errTaskCreateTimeout = errors.New("mcpclient: the server did not answer the creation of a task in time")

// taskState is what a task call saves with its open-call record
// (agent.SaveCallState), so that a turn resumed after the process stopped
// re-attaches to the task instead of calling the tool again.
//
// A call that waits for a person's answer to the server's request for
// input (a multi-round-trip elicitation, see elicit.go) saves a state with
// Input set instead of Task: the resumed turn sends the call again, and
// the server's question finds the answer given meanwhile.
type taskState struct {
	V      int    `json:"v"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Task   string `json:"task,omitempty"`
	Input  bool   `json:"input,omitempty"`
}

// taskStateVersion is the version of the saved state this client writes.
const taskStateVersion = 1

// maxTaskID bounds a task id a server gives, so that the state fits in an
// open-call record.
const maxTaskID = 512

// parseTaskState reads a saved state; it reports false for anything that
// is not a task state of this client (another tool's state, a newer
// version, a damaged record).
func parseTaskState(s string) (taskState, bool) {
	var st taskState
	if s == "" || json.Unmarshal([]byte(s), &st) != nil || st.V != taskStateVersion ||
		st.Server == "" || st.Tool == "" || (st.Task == "") == !st.Input || len(st.Task) > maxTaskID {
		return taskState{}, false
	}
	return st, true
}

// encode is the state as saved.
func (st taskState) encode() string {
	b, _ := json.Marshal(st) // strings only: never fails
	return string(b)
}

// taskTool reports whether calls of the tool mcpName go as tasks: the tool
// says the server may run it as one, tasks are not disabled, the session's
// protocol version has tasks in the base protocol (2025-11-25, before
// 2026-07-28), and the server declares task-augmented tools/call.
func (c *conn) taskTool(mcpName string) bool {
	c.e.mu.Lock()
	ok := c.e.tasks[mcpName]
	c.e.mu.Unlock()
	return ok && c.tasksOn()
}

// tasksOn reports whether the connection's server runs tools/call as tasks.
func (c *conn) tasksOn() bool {
	if c.e.cfg.DisableTasks || c.protocol == "" || mcp.IsModernProtocol(c.protocol) {
		return false
	}
	t := c.mc.GetServerCapabilities().Tasks
	return t != nil && t.Requests != nil && t.Requests.Tools != nil && t.Requests.Tools.Call != nil
}

// resumedTask returns the task a resumed call of tool saved, when ctx is
// the context of a call that a resumed turn took up (its state is set),
// and an error when that state names no task of this server's tool: the
// call is then never sent again.
func (c *conn) resumedTask(ctx context.Context, tool string) (string, error) {
	info, ok := agent.CallFromContext(ctx)
	if !ok || info.State == "" {
		return "", nil
	}
	st, ok := parseTaskState(info.State)
	if !ok || st.Server != c.e.cfg.Name || st.Tool != tool {
		return "", toolError("the call stopped with its process, and what it saved to find its task again cannot be read: it is not run again")
	}
	return st.Task, nil // empty for a call that waited for input: sent again
}

// taskCall runs a call as a task (MCP 2025-11-25): a task-augmented
// tools/call, whose task id is saved with the call's open-call record
// before the client waits; then the task is polled until it ends (its
// status message shown as progress) and its result read. With taskID set
// (a resumed call) nothing is sent: the call re-attaches to that task.
//
// At most once: the state is saved only once the server named the task,
// so a process that stops before that leaves a call without a state, which
// a resumed turn reports as stopped and never sends again. When ctx ends,
// the task is cancelled (tasks/cancel), unless the run is being suspended
// (a host that shuts down: the cause wraps agent.ErrSuspended), when it
// keeps running for the resumed turn.
func (c *conn) taskCall(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress, taskID string) (string, error) {
	c.mu.Lock()
	if c.closing || c.isLost() {
		c.mu.Unlock()
		return "", fmt.Errorf("%w: %w", errNotSent, c.lostError())
	}
	c.calls.Add(1)
	c.mu.Unlock()
	defer c.calls.Done()
	// Requests end when ctx does or the connection is lost.
	rctx, stop := context.WithCancelCause(noDeadline{ctx})
	defer stop(nil)
	go func() {
		select {
		case <-c.lost:
			stop(c.lostError())
		case <-rctx.Done():
		}
	}()

	if taskID == "" {
		// The creation is not cut by ctx: the server may have made the
		// task already, and only its answer names it, which an interrupted
		// call needs to cancel it (a lost connection still ends it, and
		// taskCreateTimeout bounds it).
		cctx, cstop := context.WithTimeoutCause(context.WithoutCancel(rctx), taskCreateTimeout, errTaskCreateTimeout)
		defer cstop()
		unwatch := context.AfterFunc(rctx, func() {
			if ctx.Err() == nil {
				cstop() // the connection was lost
			}
		})
		var res *mcp.CallToolResult
		var err error
		taskID, res, err = c.createTask(cctx, tool, args, progress)
		unwatch()
		if err != nil {
			return "", c.taskError(ctx, rctx, err)
		}
		if res != nil {
			// The server ran the call at once, without a task.
			return c.reply(ctx, tool, callReply{res: res})
		}
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), agent.ErrSuspended) {
			// Interrupted while the task was being created.
			c.cancelTask(ctx, taskID)
			return "", context.Cause(ctx)
		}
		st := taskState{V: taskStateVersion, Server: c.e.cfg.Name, Tool: tool, Task: taskID}
		if err := agent.SaveCallState(ctx, st.encode()); err != nil && !errors.Is(err, agent.ErrNoCallRecord) {
			c.e.log.Warn("the task of a call could not be saved: a resumed turn will not find it", "tool", tool, "err", err)
		}
	}
	res, err := c.awaitTask(rctx, taskID, progress)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), agent.ErrSuspended) {
			c.cancelTask(ctx, taskID)
		}
		return "", c.taskError(ctx, rctx, err)
	}
	return c.reply(ctx, tool, callReply{res: res})
}

// taskError is the error of a task call that got no result.
func (c *conn) taskError(ctx, rctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if rctx.Err() != nil {
		return context.Cause(rctx) // the connection was lost
	}
	return c.callError(ctx, err)
}

// taskRequests numbers the task-augmented requests: their ids are strings,
// never the numbers mcp-go gives its own requests.
var taskRequests atomic.Uint64

// createTask sends the task-augmented tools/call and returns the task's
// id, or the result when the server answered with one at once. mcp-go's
// CallTool cannot read a CreateTaskResult, so the request goes through
// the transport.
func (c *conn) createTask(ctx context.Context, tool string, args json.RawMessage, progress agent.Progress) (string, *mcp.CallToolResult, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	params := mcp.CallToolParams{Name: tool, Arguments: args, Task: &mcp.TaskParams{}}
	if progress != nil {
		token := "planround-" + strconv.FormatUint(c.seq.Add(1), 10)
		params.Meta = &mcp.Meta{ProgressToken: token}
		c.progMu.Lock()
		c.progress[token] = progress
		c.progMu.Unlock()
		defer func() {
			c.progMu.Lock()
			delete(c.progress, token)
			c.progMu.Unlock()
		}()
	}
	params.Meta = withTraceContext(ctx, params.Meta)
	resp, err := c.mc.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId("planround-task-" + strconv.FormatUint(taskRequests.Add(1), 10)),
		Method:  string(mcp.MethodToolsCall),
		Params:  params,
	})
	if err != nil {
		return "", nil, err
	}
	if resp.Error != nil {
		return "", nil, resp.Error.AsError()
	}
	return readCreateTask(resp.Result)
}

// readCreateTask reads the answer to a task-augmented tools/call: a task,
// or a plain result.
func readCreateTask(raw json.RawMessage) (string, *mcp.CallToolResult, error) {
	var probe struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return "", nil, fmt.Errorf("the answer to a task call is not JSON: %w", err)
	}
	if probe.Task == nil {
		res, err := mcp.ParseCallToolResult(&raw)
		return "", res, err
	}
	switch id := probe.Task.TaskID; {
	case id == "":
		return "", nil, errors.New("the server created a task without an id")
	case len(id) > maxTaskID:
		return "", nil, fmt.Errorf("the server created a task whose id is %d bytes long, at most %d", len(id), maxTaskID)
	default:
		return id, nil, nil
	}
}

// awaitTask polls the task until it ends or asks for input, writing each
// new status message to progress, and returns its result.
func (c *conn) awaitTask(ctx context.Context, taskID string, progress agent.Progress) (*mcp.CallToolResult, error) {
	every := c.e.taskPoll
	if every <= 0 {
		every = defaultTaskPoll
	}
	var shown string
	var timer *time.Timer
	for {
		t, err := c.mc.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: taskID}})
		if err != nil {
			return nil, fmt.Errorf("the task of the call: %w", err)
		}
		if m := t.StatusMessage; m != "" && m != shown && progress != nil {
			shown = m
			progress.WriteString(c.e.red.String(m) + "\n")
		}
		switch t.Status {
		case mcp.TaskStatusCompleted, mcp.TaskStatusFailed, mcp.TaskStatusInputRequired:
			// tasks/result waits for the end of a task that needs input,
			// and carries the server's requests for it meanwhile.
			res, err := c.mc.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: taskID}})
			if err != nil {
				if t.Status == mcp.TaskStatusFailed {
					return nil, toolError("the task failed: " + cmp(t.StatusMessage, err.Error()))
				}
				return nil, fmt.Errorf("the result of the task: %w", err)
			}
			return &mcp.CallToolResult{Result: res.Result, Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil
		case mcp.TaskStatusCancelled:
			return nil, toolError("the task was cancelled" + suffix(t.StatusMessage))
		}
		wait := every
		if p := t.PollInterval; p != nil && *p > 0 && *p < int64(time.Hour/time.Millisecond) {
			wait = time.Duration(*p) * time.Millisecond
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// suffix is ": " and m, or "" without m.
func suffix(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}

// cancelTask asks the server to cancel the task of an interrupted call;
// best effort.
func (c *conn) cancelTask(ctx context.Context, taskID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelTimeout)
	defer cancel()
	if _, err := c.mc.CancelTask(cctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: taskID}}); err != nil {
		c.e.log.Debug("cancelling the task of an interrupted call failed", "err", err)
	}
}
