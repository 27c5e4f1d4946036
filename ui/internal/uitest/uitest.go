// Package uitest is the test bench of the front-end protocol handlers
// (ui/aisdk, ui/agui): a scripted model, an agent with the tools of every
// scenario on a durable in-memory store, its runner, approvals and forms,
// and the runner of the Node scripts that drive a handler with the
// protocols' real clients.
package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// Messages a scenario starts with. The script keys on a word of the
// user's message:
//
//   - "hello": a planning round that needs no tool (<no_tool>);
//   - "long": a planning round of 40 deltas, 50 ms apart (a reconnect
//     mid-turn);
//   - "weather": plan, then get_weather {"city":"Lima"}, which needs
//     approval, then an answer with its result;
//   - "two": get_weather for Lima and for Quito in one round;
//   - "slow": slow_task, which runs until it is interrupted;
//   - "ask": ask_user_question (a form, question "city": Lima or Quito);
//   - "card": show_card (title "Paris");
//   - "research": the sub-agent research, whose own run calls
//     get_weather {"city":"Quito"} (an approval inside the sub-agent);
//   - "order <arguments>" (Order): place_order, which needs approval,
//     with the arguments as the message writes them;
//   - "slowly": after the tool round the answer comes as 40 deltas, 50
//     ms apart.
//
// After a tool round the model answers "Done: " and the last result.
const (
	Hello    = "hello"
	Long     = "tell me something long"
	Weather  = "what is the weather in Lima"
	Two      = "weather for two cities"
	Slow     = "run the slow task"
	Ask      = "ask me which city"
	Card     = "show me a card"
	Research = "research the weather"
	// WeatherSlowly is Weather with an answer that takes two seconds.
	WeatherSlowly = "what is the weather in Lima, answered slowly"
	// Order starts a message whose rest is the arguments of a place_order
	// call, such as Order+`{"price":2.50}`.
	Order = "order "
)

// AskArgs are the arguments of the script's ask_user_question call.
const AskArgs = `{"questions":[{"id":"city","question":"Which city?","kind":"single","options":["Lima","Quito"]}]}`

// Script is the model's script (see the constants).
func Script(req *agenttest.Request) agenttest.Response {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	user := lastUser(msgs)
	switch {
	case last.Role == "tool" && strings.Contains(user, "slowly"):
		pieces := []string{"Done: ", last.Content, ". "}
		for i := range 40 {
			pieces = append(pieces, fmt.Sprintf("word%d ", i))
		}
		return agenttest.Reply().Text(pieces...).Usage(20, 45).Finish("stop").Delay(50 * time.Millisecond)
	case last.Role == "tool":
		return agenttest.Reply().Text("Done: ", last.Content).Usage(20, 5).Finish("stop")
	case !req.HasTools() && strings.Contains(user, "hello"):
		return agenttest.Reply().Text("Hello ", "there! <no_tool>").Usage(10, 3).Finish("stop")
	case !req.HasTools() && strings.Contains(user, "long"):
		pieces := make([]string, 40)
		for i := range pieces {
			pieces[i] = fmt.Sprintf("word%d ", i)
		}
		pieces = append(pieces, "<no_tool>")
		return agenttest.Reply().Text(pieces...).Finish("stop").Delay(50 * time.Millisecond)
	case !req.HasTools():
		return agenttest.Reply().Text("Let me do that. <need_tool>").Usage(10, 4).Finish("stop")
	case strings.HasPrefix(user, Order):
		return agenttest.Reply().Call(0, "call_o", "place_order", strings.TrimPrefix(user, Order)).Finish("tool_calls")
	case strings.Contains(user, "research"):
		return agenttest.Reply().Call(0, "call_r", "research", `{"task":"weather in Quito"}`).Finish("tool_calls")
	case strings.Contains(user, "weather in Quito"):
		return agenttest.Reply().Call(0, "call_q", "get_weather", `{"city":"Quito"}`).Finish("tool_calls")
	case strings.Contains(user, "two"):
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Call(1, "call_2", "get_weather", `{"city":"Quito"}`).Finish("tool_calls")
	case strings.Contains(user, "weather"):
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	case strings.Contains(user, "slow"):
		return agenttest.Reply().Call(0, "call_s", "slow_task", `{}`).Finish("tool_calls")
	case strings.Contains(user, "ask"):
		return agenttest.Reply().Call(0, "call_a", "ask_user_question", AskArgs).Finish("tool_calls")
	case strings.Contains(user, "card"):
		return agenttest.Reply().Call(0, "call_c", "show_card", `{"title":"Paris","body":"Sunny all week."}`).Finish("tool_calls")
	}
	return agenttest.Reply().Text("I do not know that one.").Finish("stop")
}

func lastUser(msgs []agenttest.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && msgs[i].Content != "[continue]" {
			return msgs[i].Content
		}
	}
	return ""
}

// Bench is one process of a test: the model, and a runner (its agent,
// approvals and forms) on one in-memory store.
type Bench struct {
	Model  *agenttest.Server
	Store  *memory.MemStore
	Agent  *agent.Agent
	Runner *runner.Runner
	// Runs counts get_weather's executions.
	Runs atomic.Int32
	// SlowStarted counts slow_task's starts.
	SlowStarted atomic.Int32

	mu     sync.Mutex
	orders []string // the arguments place_order ran with
}

// Orders returns the arguments place_order ran with, as the tool got them.
func (b *Bench) Orders() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.orders)
}

// Options change a Bench.
type Options struct {
	// StreamToolArguments is the agent's Config.StreamToolArguments.
	StreamToolArguments bool
	// WindDown is how long slow_task takes to return once interrupted (it
	// cleans up).
	WindDown time.Duration
	// SuspendAfter is the runner's Config.SuspendAfter: a call that waits
	// for a person that long ends the turn, suspended.
	SuspendAfter time.Duration
	// Store, when set, is the runner's store instead of Bench.Store (a
	// SQLite file, say); Bench.Store is then unused.
	Store memory.Store
}

// New starts a Bench; it is closed when t ends.
func New(t testing.TB, o Options) *Bench {
	t.Helper()
	b := &Bench{Model: agenttest.NewServer(), Store: &memory.MemStore{}}
	b.Model.Respond(Script)
	t.Cleanup(func() {
		b.Model.Client().CloseIdleConnections()
		b.Model.Close()
	})
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "Weather for a city.", func(ctx context.Context, in city, _ agent.Progress) (string, error) {
		b.Runs.Add(1)
		return "sunny in " + in.City, nil
	})
	slow := agent.NewTool("slow_task", "A task that takes long.", func(ctx context.Context, _ struct{}, p agent.Progress) (string, error) {
		b.SlowStarted.Add(1)
		fmt.Fprint(p, "working")
		<-ctx.Done()
		time.Sleep(o.WindDown)
		return "", ctx.Err()
	})
	order := agent.FuncTool{
		Def: agent.ToolDefinition{Name: "place_order", Description: "Places an order.", Parameters: map[string]any{"type": "object"}},
		Fn: func(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			b.mu.Lock()
			b.orders = append(b.orders, string(args))
			b.mu.Unlock()
			return "ordered " + string(args), nil
		},
	}
	base := agent.Config{
		BaseURL:             b.Model.URL(),
		APIKey:              "test-key",
		HTTPClient:          b.Model.Client(),
		Model:               "test-model",
		StreamToolArguments: o.StreamToolArguments,
	}
	subTools, err := agent.NewToolRegistry(weather)
	if err != nil {
		t.Fatal(err)
	}
	subCfg := base
	subCfg.Tools = subTools
	subCfg.DisablePlanning = true
	research, err := agent.NewSubAgent("research", "Researches a task.", subCfg)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agent.NewToolRegistry(weather, slow, order, interact.AskUserQuestion(), interact.ShowCard(), research)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"slow_task", "ask_user_question", "show_card", "research"} {
		if err := tools.SetSkipApproval(name, true); err != nil {
			t.Fatal(err)
		}
	}
	cfg := base
	cfg.Tools = tools
	var st memory.Store = b.Store
	if o.Store != nil {
		st = o.Store
	}
	if b.Runner, err = runner.New(runner.Config{Store: st, Agent: cfg, InterruptOnClose: true, SuspendAfter: o.SuspendAfter}); err != nil {
		t.Fatal(err)
	}
	b.Agent = b.Runner.Agent()
	t.Cleanup(func() { b.Runner.Close() })
	return b
}

// The npm folder of the protocol clients, relative to the module's root.
const npmFolder = "ui/testdata/npm"

// NPMDir returns the folder of the installed protocol clients
// (ui/testdata/npm). It skips t when node is missing or the packages are
// not installed, saying what to run, and fails t instead under
// PLANROUND_REQUIRE_ALL=1.
func NPMDir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "node is not on PATH: install Node.js (>= 20) to run the front-end protocol clients")
	}
	dir := filepath.Join(moduleRoot(t), filepath.FromSlash(npmFolder))
	for _, pkg := range []string{"ai", "@ag-ui/client", "@ag-ui/core"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
			unavailable(t, "the npm package %s is not installed: run `npm ci --no-fund --no-audit` in %s", pkg, dir)
		}
	}
	return dir
}

// Node runs the Node script at path (an .mjs file; relative paths are
// relative to the test's package) with args and NODE_PATH set to the
// protocol clients, bounded by d; it returns the script's standard output,
// and fails t with both outputs when the script fails.
func Node(t testing.TB, d time.Duration, script string, args ...string) string {
	t.Helper()
	dir := NPMDir(t)
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	// An .mjs file resolves packages from its own folder up, not from
	// NODE_PATH: the script is copied next to node_modules.
	tmp, err := os.CreateTemp(dir, ".run-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp.Name())
	src, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(src); err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	cmd := exec.CommandContext(ctx, "node", append([]string{tmp.Name()}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(script), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
		t.Fatal(msg + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
	}
	t.Skip(msg)
}

// moduleRoot returns the root of this module, found by walking up from the
// test's working directory to its go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/planround/planround\n")) {
			return dir
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("uitest: no go.mod of github.com/planround/planround above the test's folder")
		}
		dir = parent
	}
}

// PendingApprovals returns the session's pending approvals, as the runner
// lists them.
func (b *Bench) PendingApprovals(ctx context.Context, sessionID string) ([]approval.PendingApproval, error) {
	list, err := b.Runner.Pending(ctx, sessionID)
	var out []approval.PendingApproval
	for _, a := range list {
		if a.Approval != nil {
			out = append(out, *a.Approval)
		}
	}
	return out, err
}

// PendingForms returns the session's open forms, as the runner lists them.
func (b *Bench) PendingForms(ctx context.Context, sessionID string) ([]interact.PendingForm, error) {
	list, err := b.Runner.Pending(ctx, sessionID)
	var out []interact.PendingForm
	for _, a := range list {
		if a.Form != nil {
			out = append(out, *a.Form)
		}
	}
	return out, err
}
