package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// tinyPNG is a 1×1 PNG image; silentWAV is a WAV header with no samples.
const (
	tinyPNG   = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	silentWAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
)

// state is what the process remembers between calls.
type state struct {
	count     atomic.Int64 // calls of counter
	cancelled atomic.Int64 // calls that saw their cancellation
}

// tools returns every tool of the server, described in the package comment.
func (s *state) tools() []server.ServerTool {
	return []server.ServerTool{
		{
			Tool: mcp.NewTool("echo", mcp.WithDescription("Answers with its text."),
				mcp.WithString("text", mcp.Required(), mcp.Description("the text to answer with"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				text, err := req.RequireString("text")
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				return mcp.NewToolResultText(text), nil
			},
		},
		{
			Tool: mcp.NewTool("image", mcp.WithDescription("Answers with a text and a 1×1 PNG image.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultImage("a tiny image", tinyPNG, "image/png"), nil
			},
		},
		{
			Tool: mcp.NewTool("audio", mcp.WithDescription("Answers with a text and a silent WAV sound.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultAudio("a short sound", silentWAV, "audio/wav"), nil
			},
		},
		{
			Tool: mcp.NewTool("fail", mcp.WithDescription("Answers with a tool error (isError) holding its message."),
				mcp.WithString("message", mcp.Description("the error's text"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultError(req.GetString("message", "fail: this tool always fails")), nil
			},
		},
		{
			Tool: mcp.NewTool("progress", mcp.WithDescription("Reports progress in steps, then answers."),
				mcp.WithInteger("steps", mcp.Description("how many steps (default 3)")),
				mcp.WithInteger("delay_ms", mcp.Description("milliseconds to wait after each step (default 20)"))),
			Handler: s.progress,
		},
		{
			Tool: mcp.NewTool("slow", mcp.WithDescription("Waits until it is cancelled (or for seconds), then answers."),
				mcp.WithNumber("seconds", mcp.Description("how long to wait at most (default 0: until cancelled)"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var limit <-chan time.Time
				if d := req.GetFloat("seconds", 0); d > 0 {
					limit = time.After(time.Duration(d * float64(time.Second)))
				}
				select {
				case <-limit:
					return mcp.NewToolResultText("slow: done"), nil
				case <-ctx.Done():
					return nil, s.sawCancel("slow", ctx)
				}
			},
		},
		{
			Tool: mcp.NewTool("hang", mcp.WithDescription("Never answers, and ignores cancellation.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				for { // a sleeping goroutine, so the runtime never calls this a deadlock
					time.Sleep(time.Hour)
				}
			},
		},
		{
			Tool: mcp.NewTool("crash", mcp.WithDescription("Exits the server process without answering."),
				mcp.WithInteger("status", mcp.Description("the exit status (default 3)"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				status := req.GetInt("status", 3)
				fmt.Fprintf(os.Stderr, "stdioserver: crash: exiting with status %d\n", status)
				os.Exit(status)
				return nil, nil
			},
		},
		{
			Tool: mcp.NewTool("spawn", mcp.WithDescription("Starts a child process (sleep) and answers with its pid."),
				mcp.WithInteger("seconds", mcp.Description("how long the child sleeps (default 300)")),
				mcp.WithBoolean("block", mcp.Description("report the pid by progress and wait until cancelled"))),
			Handler: s.spawn,
		},
		{
			Tool: mcp.NewTool("counter", mcp.WithDescription("Adds one to this process's count and answers with it.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(strconv.FormatInt(s.count.Add(1), 10)), nil
			},
		},
		{
			Tool: mcp.NewTool("pid", mcp.WithDescription("Answers with the server's process id.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
			},
		},
		{
			Tool: mcp.NewTool("env", mcp.WithDescription("Answers with an environment variable's value."),
				mcp.WithString("name", mcp.Required(), mcp.Description("the variable's name"))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				name, err := req.RequireString("name")
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				v, ok := os.LookupEnv(name)
				if !ok {
					return mcp.NewToolResultError("env: " + name + " is not set"), nil
				}
				return mcp.NewToolResultText(v), nil
			},
		},
		{
			Tool: mcp.NewTool("cwd", mcp.WithDescription("Answers with the server's working directory.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				dir, err := os.Getwd()
				if err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				return mcp.NewToolResultText(dir), nil
			},
		},
		{
			Tool: mcp.NewTool("resources", mcp.WithDescription("Answers with a resource link and embedded resources.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{
					mcp.NewTextContent("two notes and some bytes"),
					mcp.NewResourceLink("mcptest://notes/readme.txt", "readme.txt", "a note to read", "text/plain"),
					mcp.NewEmbeddedResource(mcp.TextResourceContents{
						URI: "mcptest://notes/hello.txt", MIMEType: "text/plain", Text: "hello from an embedded resource",
					}),
					mcp.NewEmbeddedResource(mcp.BlobResourceContents{
						URI: "mcptest://data/blob.bin", MIMEType: "application/octet-stream", Blob: "AAECAw==",
					}),
				}}, nil
			},
		},
		{
			Tool: mcp.NewTool("cancelled", mcp.WithDescription("Answers with how many calls saw their cancellation.")),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(strconv.FormatInt(s.cancelled.Load(), 10)), nil
			},
		},
	}
}

// progress sends one notification per step, each followed by the delay, so
// that the last one is written well before the answer: mcp-go writes
// notifications from a queue of their own and answers directly, and with no
// delay the answer can overtake the last notification.
func (s *state) progress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := req.GetInt("steps", 3)
	delay := time.Duration(req.GetInt("delay_ms", 20)) * time.Millisecond
	token := progressToken(req)
	for i := 1; i <= steps; i++ {
		if token != nil {
			notifyProgress(ctx, token, i, steps, fmt.Sprintf("step %d of %d", i, steps))
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, s.sawCancel("progress", ctx)
		}
	}
	return mcp.NewToolResultText(fmt.Sprintf("progress: done %d steps", steps)), nil
}

// spawn starts the child in the server's process group and reaps it when it
// ends, so that it never stays a zombie of a live server.
func (s *state) spawn(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	child := exec.Command("sleep", strconv.Itoa(req.GetInt("seconds", 300)))
	if err := child.Start(); err != nil {
		return mcp.NewToolResultError("spawn: " + err.Error()), nil
	}
	go func() { _ = child.Wait() }()
	pid := strconv.Itoa(child.Process.Pid)
	if !req.GetBool("block", false) {
		return mcp.NewToolResultText(pid), nil
	}
	fmt.Fprintf(os.Stderr, "stdioserver: spawn: child pid %s\n", pid)
	if token := progressToken(req); token != nil {
		notifyProgress(ctx, token, 1, 0, "child pid "+pid)
	}
	<-ctx.Done()
	return nil, s.sawCancel("spawn", ctx)
}

// sawCancel counts a call that ended because it was cancelled, and returns
// the error it ends with.
func (s *state) sawCancel(tool string, ctx context.Context) error {
	s.cancelled.Add(1)
	fmt.Fprintf(os.Stderr, "stdioserver: %s: cancelled\n", tool)
	return ctx.Err()
}

// progressToken returns the request's progress token, or nil.
func progressToken(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// notifyProgress sends a notifications/progress message; total 0 leaves the
// total out.
func notifyProgress(ctx context.Context, token mcp.ProgressToken, progress, total int, message string) {
	params := map[string]any{"progressToken": token, "progress": progress, "message": message}
	if total > 0 {
		params["total"] = total
	}
	srv := server.ServerFromContext(ctx)
	if err := srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params); err != nil {
		fmt.Fprintf(os.Stderr, "stdioserver: progress notification: %v\n", err)
	}
}

// hugeResult is the handler of every tool in -mode=huge.
func hugeResult(size int) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(strings.Repeat("x", size)), nil
	}
}
