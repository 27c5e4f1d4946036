package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
)

// defaultSession is the session id of a CLI's runs when it has no -session:
// without -db the process holds one conversation, and the per_conversation
// MCP servers need a session id to give it an instance of its own, as the
// forms of ask_user_question need one to be answered.
const defaultSession = "cli"

// startMCP starts the MCP servers of the configuration file at path and adds
// their tools to reg, after the tools already there (which keep their names).
// The tool definitions are pinned in kv (nil: in memory), and the servers'
// requests for input are asked on the terminal (through the forms each
// turn's context carries). Ctrl-C
// while the servers start abandons the start. The caller closes the client.
func startMCP(ctx context.Context, path string, reg *agent.ToolRegistry, kv memory.KV, logger *slog.Logger) (*mcpclient.Client, error) {
	servers, err := mcpclient.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("-mcp %s: %w", path, err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	mc, err := mcpclient.New(ctx, servers, mcpclient.Options{Logger: logger, KV: kv})
	if err != nil {
		return nil, fmt.Errorf("-mcp %s: %w", path, err)
	}
	if err := mc.Register(reg); err != nil {
		mc.Close()
		return nil, fmt.Errorf("-mcp %s: %w", path, err)
	}
	return mc, nil
}

// printServers writes a line per MCP server: its name, transport,
// isolation, state and the names the model knows its tools by.
//
//	cli: MCP server files (stdio, shared): connected; tools: read_file, list_directory
func printServers(w io.Writer, mc *mcpclient.Client) {
	for _, st := range mc.Servers() {
		tools := strings.Join(st.Tools, ", ")
		if tools == "" {
			tools = "none"
		}
		line := fmt.Sprintf("cli: MCP server %s (%s, %s): %s; tools: %s", st.Name, st.Transport, st.Isolation, st.State, tools)
		if st.Error != "" {
			line += "; error: " + st.Error
		}
		fmt.Fprintln(w, line)
	}
}

// terminator ends the runs when the process is asked to end (SIGTERM, or
// SIGHUP when its terminal goes away), so that run returns through its
// deferred clean-up, which ends the MCP servers and what they started (see
// mcpclient's documentation for what that reaches): left to the default
// action, the signal would kill the process at once, with no clean-up, and
// only on Linux would the servers' guard end them.
type terminator struct {
	sigs chan os.Signal
	done chan struct{}
	wg   sync.WaitGroup

	mu  sync.Mutex // guards sig
	sig os.Signal  // the signal received; nil if none
}

// terminateOn returns a context that ends when SIGTERM or SIGHUP arrives.
// Call stop when done.
func terminateOn(ctx context.Context, stderr io.Writer) (context.Context, *terminator) {
	ctx, cancel := context.WithCancel(ctx)
	t := &terminator{sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(t.sigs, syscall.SIGTERM, syscall.SIGHUP)
	t.wg.Go(func() {
		defer cancel()
		select {
		case sig := <-t.sigs:
			t.mu.Lock()
			t.sig = sig
			t.mu.Unlock()
			fmt.Fprintf(stderr, "\ncli: %v: ending the run and the MCP servers\n", sig)
		case <-t.done:
		}
	})
	return ctx, t
}

// status returns the exit status of a process ended by the signal
// received, 128 plus its number as shells report it, and whether one was
// received.
func (t *terminator) status() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sig == nil {
		return 0, false
	}
	if s, ok := t.sig.(syscall.Signal); ok {
		return 128 + int(s), true
	}
	return 1, true
}

// stop restores the default action of the signals and ends the watcher.
func (t *terminator) stop() {
	signal.Stop(t.sigs)
	close(t.done)
	t.wg.Wait()
}

// exitStatus returns the exit status of a process ended by the signal t
// received, if any, else status.
func exitStatus(t *terminator, status int) int {
	if s, ok := t.status(); ok {
		return s
	}
	return status
}
