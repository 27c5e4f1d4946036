package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
)

func TestMain(m *testing.M) {
	// The in-process runs need no pause between deltas; the built binary
	// keeps the demo's pace.
	demoModel.Delay = 0
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if stdioBuild.dir != "" {
		os.RemoveAll(stdioBuild.dir)
	}
	os.Exit(code)
}

// Prompts the demo model answers in a known way.
const (
	weatherPrompt = "What's the weather in Paris?"
	helloPrompt   = "hello"
)

// commandPrompt asks the demo model to run cmd with run_command.
func commandPrompt(cmd string) string { return "run `" + cmd + "`" }

// noModelEnv makes run choose the demo model, whatever the environment of
// the test holds.
func noModelEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "NO_COLOR"} {
		t.Setenv(k, "")
	}
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI calls run in-process with stdin as input.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	// A run that hangs is interrupted, and fails the test's checks.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// parseChunks decodes stdout of a -json run: every line must be one chunk.
func parseChunks(t *testing.T, stdout string) []agent.Chunk {
	t.Helper()
	require.True(t, strings.HasSuffix(stdout, "\n"), "stdout ends with a newline: %q", stdout)
	var chunks []agent.Chunk
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var c agent.Chunk
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&c), "line %d is not a chunk: %q", i+1, line)
		require.False(t, dec.More(), "line %d holds more than one value: %q", i+1, line)
		require.NotEqual(t, agent.KindInvalid, c.Kind, "line %d", i+1)
		chunks = append(chunks, c)
	}
	return chunks
}

// trace renders chunks compactly, merging runs of text and of partial
// output: "text", "round_end:0:need_tool", "tool:start:get_weather",
// "tool:progress:run_command", "rejected:run_command:tool call interrupted".
func trace(chunks []agent.Chunk) []string {
	var out []string
	add := func(s string, merge bool) {
		if n := len(out); merge && n > 0 && out[n-1] == s {
			return
		}
		out = append(out, s)
	}
	for _, c := range chunks {
		switch c.Kind {
		case agent.KindText, agent.KindReasoning:
			add(c.Kind.String(), true)
		case agent.KindRoundEnd:
			s := fmt.Sprintf("round_end:%d", c.Round)
			if c.Intent != "" {
				s += ":" + string(c.Intent)
			}
			add(s, false)
		case agent.KindToolCall:
			if c.Tool.State == agent.StateExecuting && c.Tool.PartialResult != "" {
				add("tool:progress:"+c.Tool.Name, true)
				continue
			}
			add("tool:"+string(c.Tool.State)+":"+c.Tool.Name, false)
		case agent.KindToolRejected:
			add("rejected:"+c.Tool.Name+":"+c.Tool.Reason, false)
		default:
			add(c.Kind.String(), false)
		}
	}
	return out
}

func roundText(chunks []agent.Chunk, round int) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind == agent.KindText && c.Round == round {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func TestJSONWeatherWithYes(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", "-yes", "-json", weatherPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	chunks := parseChunks(t, r.stdout)

	tr := trace(chunks)
	// -yes is a policy: nobody is asked, so no approval card.
	assert.Equal(t, []string{
		"round_end:0:need_tool",
		"tool:start:get_weather",
		"tool:executing:get_weather", "tool:result:get_weather", "round_end:1",
		"round_end:2",
	}, structure(tr), "full trace: %v", tr)
	assert.Equal(t, "text", tr[0], "the planning round answers in words first")
	assert.Equal(t, []string{"text", "round_end:2"}, tr[len(tr)-2:], "a final answer in text")
	for _, c := range chunks {
		if c.Kind == agent.KindToolCall && c.Tool.State == agent.StateResult {
			assert.JSONEq(t, `{"city":"Paris"}`, string(c.Tool.Arguments))
			assert.NotEmpty(t, c.Tool.Result)
		}
	}
	assert.NotEmpty(t, strings.TrimSpace(roundText(chunks, 2)), "the final answer is text")
	assert.Contains(t, r.stderr, "demo model", "says once that the demo model answers")
	assert.Equal(t, 1, strings.Count(r.stderr, "demo model"))
	assert.NotContains(t, r.stdout, "\x1b[", "no colour in a JSON log")
}

// structure drops text and reasoning from a trace, keeping rounds and tool
// states.
func structure(tr []string) []string {
	var out []string
	for _, s := range tr {
		if s != "text" && s != "reasoning" {
			out = append(out, s)
		}
	}
	return out
}

func TestHumanWeatherApprovedOnTerminal(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "y\n", weatherPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)

	assert.Contains(t, r.stderr, "approve [y] / reject [n]", "the terminal approver asked on stderr")
	assert.Contains(t, r.stdout, `⏺ get_weather {"city":"Paris"}`)
	assert.Contains(t, r.stdout, "  … executing\n")
	assert.Contains(t, r.stdout, "  ✓ result: ")
	assert.NotContains(t, r.stdout, "rejected")
	assert.NotContains(t, r.stdout, "\x1b[", "no ANSI codes when stdout is not a terminal")
	assert.NotContains(t, r.stdout, "<need_tool>", "tags never visible")
	// The header comes before executing, executing before the result, and
	// the answer after the result.
	h := strings.Index(r.stdout, "⏺ get_weather")
	e := strings.Index(r.stdout, "… executing")
	res := strings.Index(r.stdout, "✓ result:")
	require.True(t, h < e && e < res, "order of the tool lines:\n%s", r.stdout)
	assert.NotEmpty(t, strings.TrimSpace(r.stdout[strings.Index(r.stdout[res:], "\n")+res:]), "the answer follows the result")
}

func TestHumanWeatherRejectedOnTerminal(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "n not now\n", weatherPrompt)
	require.Equal(t, exitRejected, r.code, "a rejection ends the run, which did not do what was asked; stderr: %s", r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, question), "the transcript says why, stderr adds nothing: %q", r.stderr)
	assert.Contains(t, r.stdout, `⏺ get_weather {"city":"Paris"}`)
	assert.Contains(t, r.stdout, "  ✗ "+agent.CauseUser.DefaultReason()+": not now\n", "the reason says \"rejected\" once")
	assert.NotContains(t, r.stdout, "rejected: rejected")
	assert.Contains(t, r.stdout, "⏹ stopped: the tool call was rejected\n", "not \"interrupted\": nobody pressed Ctrl-C")
	assert.NotContains(t, r.stdout, "executing")
	assert.NotContains(t, r.stdout, "✓ result")
}

func TestJSONRejectedWhenInputEnds(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	// No -yes and an empty stdin: nobody can answer, so the call is
	// rejected rather than left hanging, and the CLI fails: the prompt was
	// not answered.
	r := runCLI(t, "", "-json", weatherPrompt)
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\ncli: get_weather was not run: the input ended before the approval question was answered (answer on stdin, or pass -yes)\n"), "stderr: %q", r.stderr)
	tr := trace(parseChunks(t, r.stdout))
	require.GreaterOrEqual(t, len(tr), 2)
	assert.Equal(t, []string{"rejected:get_weather:" + approval.ReasonEndOfInput, "interrupted"}, tr[len(tr)-2:])
}

func TestHumanRejectedWhenInputEnds(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", weatherPrompt)
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "  ✗ "+approval.ReasonEndOfInput+"\n")
	assert.NotContains(t, r.stdout, "rejected: rejected")
	assert.True(t, strings.HasSuffix(r.stderr, "cli: get_weather was not run: the input ended before the approval question was answered (answer on stdin, or pass -yes)\n"), "stderr: %q", r.stderr)

	// In the prompt loop too: the input ends at the question, then the loop.
	l := runCLI(t, weatherPrompt+"\n")
	assert.Equal(t, 1, l.code, "stderr: %s", l.stderr)
	assert.Contains(t, l.stderr, "cli: get_weather was not run: the input ended")
}

func TestNoToolPromptContinues(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", "-json", helloPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	chunks := parseChunks(t, r.stdout)
	assert.Equal(t, []string{"text", "round_end:0:no_tool", "text", "round_end:1"}, trace(chunks))
	assert.NotEmpty(t, strings.TrimSpace(roundText(chunks, 1)), "the continuation round answers")

	h := runCLI(t, "", helloPrompt)
	require.Equal(t, 0, h.code, "stderr: %s", h.stderr)
	assert.NotContains(t, h.stdout, "⏺", "no tool in human output")
	assert.NotContains(t, h.stdout, "<no_tool>")
	want := ""
	for round := range 2 {
		want += roundText(chunks, round)
		if !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
	}
	assert.Equal(t, want, h.stdout, "each round's text ends its line, nothing else is shown")
}

// signalWriter is a locked buffer that calls fn, if set, once, when what was
// written so far contains marker.
type signalWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	fn     func()
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.fn != nil && strings.Contains(w.buf.String(), w.marker) {
		w.fn()
		w.fn = nil
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestRunCommandShowsPartialOutput(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	// The command prints "one", then waits until the test has seen that line
	// on the CLI's stdout, then prints "two": "one" can only have been shown
	// as partial output, while the command was still running.
	flag := filepath.Join(t.TempDir(), "seen")
	cmd := fmt.Sprintf("echo one; while [ ! -e %s ]; do sleep 0.02; done; echo two", flag)
	out := &signalWriter{marker: "  │ one\n", fn: func() {
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			panic(err)
		}
	}}
	var errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := run(ctx, []string{"-yes", commandPrompt(cmd)}, strings.NewReader(""), out, &errb)
	require.Equal(t, 0, code, "stderr: %s", errb.String())
	stdout := out.String()
	require.NotContains(t, stdout, "interrupted", "the command ran to its end:\n%s", stdout)
	assert.Contains(t, stdout, "⏺ run_command ")
	one := strings.Index(stdout, "  │ one\n")
	two := strings.Index(stdout, "  │ two\n")
	res := strings.Index(stdout, "  ✓ done\n")
	require.True(t, one >= 0 && two > one && res > two, "partial output before the end of the call:\n%s", stdout)
	assert.NotContains(t, stdout, "✓ result", "the output shown as it came is not shown again")
}

func TestModelErrorExitsOne(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(agenttest.HTTPError(500, "the model is on fire"))

	r := runCLI(t, "", "-json", "-retries", "0", "-base-url", srv.URL(), "-model", "m", helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout, "no chunk came before the error")
	assert.Equal(t, "cli: agent: round 0: model request failed: 500 Internal Server Error: the model is on fire (type server_error)\n", r.stderr,
		"one clear line, and no demo notice")
	assert.Len(t, srv.Requests(), 1, "-retries 0 sends one request")
}

// The provider's message reaches the user, once, where openai-go's own
// error says only "404 Not Found".
func TestProviderMessageIsShown(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	const msg = "The model `gpt-x` does not exist or you do not have access to it."
	srv.Enqueue(agenttest.HTTPError(404, msg), agenttest.Body(200, "text/html", "<html><body>Please sign in</body></html>"))

	r := runCLI(t, "", "-retries", "0", "-base-url", srv.URL(), "-model", "gpt-x", helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "cli: agent: round 0: model request failed: 404 Not Found: "+msg+" (type invalid_request_error)\n", r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, msg), "the message once")

	r = runCLI(t, "", "-retries", "0", "-base-url", srv.URL(), "-model", "gpt-x", helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "cli: agent: round 0: the response is not an event stream (200 OK, Content-Type \"text/html\"); it starts: <html><body>Please sign in</body></html>\n", r.stderr)
}

// On a terminal stdout and stderr share the screen: a log line of -v never
// runs into a line of streamed text.
func TestVerboseLogLinesStartOnTheirOwnLine(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	var screen signalWriter // stdout and stderr, in the order written
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := run(ctx, []string{"-v", "-yes", weatherPrompt}, strings.NewReader(""), &screen, &screen)
	require.Equal(t, 0, code, "output:\n%s", screen.String())
	logs := 0
	for _, line := range strings.Split(screen.String(), "\n") {
		if i := strings.Index(line, "level="); i >= 0 {
			logs++
			assert.True(t, strings.HasPrefix(line, "time="), "a log line that does not start its line: %q", line)
		}
	}
	assert.Equal(t, 3, logs, "one log line per model call:\n%s", screen.String())
}

func TestModelErrorMidStreamKeepsWhatArrived(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(agenttest.Reply().Text("Hello ", "there").Finish("stop").ErrorAfter(2, "overloaded"))

	r := runCLI(t, "", "-base-url", srv.URL(), "-model", "m", helloPrompt)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "Hello")
	assert.True(t, strings.HasSuffix(r.stdout, "\n"), "the output line is ended before the error")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.Len(t, lines, 1, "stderr: %q", r.stderr)
	assert.Contains(t, lines[0], "overloaded")
	assert.True(t, strings.HasPrefix(lines[0], "cli: "))
}

func TestVerboseLogsToStderrOnly(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", "-v", "-json", helloPrompt)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	parseChunks(t, r.stdout) // stdout is still nothing but chunks
	assert.Contains(t, r.stderr, "level=", "slog records on stderr")
	quiet := runCLI(t, "", "-json", helloPrompt)
	assert.NotContains(t, quiet.stderr, "level=", "no logging without -v")
}

func TestSentencesMode(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	count := func(args ...string) (n int, text string) {
		r := runCLI(t, "", append(args, "-json", helloPrompt)...)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		chunks := parseChunks(t, r.stdout)
		for _, c := range chunks {
			if c.Kind == agent.KindText {
				n++
			}
		}
		return n, roundText(chunks, 0) + roundText(chunks, 1)
	}
	deltas, text := count()
	sentences, sameText := count("-sentences")
	assert.Equal(t, text, sameText, "the same text, cut differently")
	assert.Less(t, sentences, deltas, "whole sentences come in fewer chunks than deltas")
}

func TestBadFlagsExitTwo(t *testing.T) {
	noModelEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope", "hi"}, "flag provided but not defined: -nope"},
		{"bad number", []string{"-max-rounds", "many", "hi"}, "invalid value"},
		{"zero rounds", []string{"-max-rounds", "0", "hi"}, "cli: -max-rounds must be at least 1"},
		{"session without db", []string{"-session", "s1", "hi"}, "cli: -session needs -db"},
		{"no model for a real API", []string{"-base-url", "http://127.0.0.1:1/v1", "hi"}, "cli: no model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "", tc.args...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
	t.Run("help", func(t *testing.T) {
		r := runCLI(t, "", "-h")
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stderr, "usage: cli")
	})
}

func TestInteractiveLoopKeepsHistory(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	plan := func(s string) agenttest.Response { return agenttest.Reply().Text(s, "<no_tool>").Finish("stop") }
	srv.Enqueue(
		plan("Hi."), agenttest.Reply().Text("I am here.").Finish("stop"),
		plan("Sure."), agenttest.Reply().Text("You said hello.").Finish("stop"),
	)

	// Blank lines are skipped; "quit" ends the loop before "never".
	r := runCLI(t, "hello\n\nwhat did I say?\nquit\nnever\n", "-base-url", srv.URL(), "-model", "m")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "Hi.\nI am here.\nSure.\nYou said hello.\n", r.stdout)
	assert.Equal(t, 4, strings.Count(r.stderr, "› "), "a prompt before each line read")

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	var users []string
	for _, m := range reqs[2].Messages {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	assert.Equal(t, []string{"hello", "what did I say?"}, users, "the second turn sees the first")
	var sawAnswer bool
	for _, m := range reqs[2].Messages {
		sawAnswer = sawAnswer || (m.Role == "assistant" && m.Content == "I am here.")
	}
	assert.True(t, sawAnswer, "the first answer is in the second turn's history")
}

func TestInteractiveLoopSharesStdinWithApprover(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	// Line 2 answers the approval of the first prompt; line 3 is the next
	// prompt, which must not be taken as an answer.
	r := runCLI(t, weatherPrompt+"\ny\n"+helloPrompt+"\n", "-json")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	tr := trace(parseChunks(t, r.stdout))
	assert.Contains(t, tr, "tool:result:get_weather")
	assert.Contains(t, tr, "round_end:0:no_tool", "the hello turn ran: %v", tr)
	assert.NotContains(t, strings.Join(tr, " "), "rejected")
}

func TestSessionContinuesAcrossInvocations(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	db := filepath.Join(t.TempDir(), "chat.db")
	for _, p := range []string{helloPrompt, "hello again"} {
		r := runCLI(t, "", "-db", db, "-session", "s1", p)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	}
	st, err := sqlitestore.Open(t.Context(), db)
	require.NoError(t, err)
	defer st.Close()
	msgs, err := st.Messages(t.Context(), "s1", false)
	require.NoError(t, err)
	var users []string
	for _, m := range msgs {
		if m.Role == memory.RoleUser {
			users = append(users, m.Content)
		}
	}
	assert.Equal(t, []string{helloPrompt, "hello again"}, users)
}

// --- the built binary and Ctrl-C --------------------------------------------

// built is the binary, built once for the tests that need it.
var built struct {
	once     sync.Once
	dir, bin string
	out      []byte
	err      error
}

// buildCLI builds the command once into a temporary directory, with the race
// detector when the test binary has it (so the build reuses its cache).
func buildCLI(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("go is not on PATH (PLANROUND_REQUIRE_ALL=1): cannot build the binary")
		}
		t.Skip("go is not on PATH: cannot build the binary")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "planround-cli-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "cli")
		args := []string{"build", "-o", built.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		built.out, built.err = exec.Command(goBin, append(args, ".")...).CombinedOutput()
	})
	require.NoError(t, built.err, "go build: %s", built.out)
	return built.bin
}

// proc is the built CLI running with -json.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *signalWriter
	chunks chan agent.Chunk // every chunk of stdout; closed at its end
	lines  []string         // stdout's lines; read them after chunks closed
	bad    error            // a line that is not a chunk; read after chunks closed
}

// startCLI starts the binary with args; it is killed when ctx ends.
func startCLI(ctx context.Context, t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{stderr: &signalWriter{}, chunks: make(chan agent.Chunk, 64)}
	p.cmd = exec.CommandContext(ctx, buildCLI(t), args...)
	p.cmd.Stderr = p.stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		// After a failure: the process was killed with ctx; collect it.
		for range p.chunks {
		}
		_ = p.cmd.Wait()
	})
	go func() {
		defer close(p.chunks)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines = append(p.lines, sc.Text())
			var c agent.Chunk
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil && p.bad == nil {
				p.bad = fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			p.chunks <- c
		}
	}()
	return p
}

// await returns the first chunk that satisfies ok.
func (p *proc) await(ctx context.Context, t *testing.T, what string, ok func(agent.Chunk) bool) agent.Chunk {
	t.Helper()
	for {
		select {
		case c, more := <-p.chunks:
			require.True(t, more, "stdout ended before %s; stderr: %s", what, p.stderr.String())
			if ok(c) {
				return c
			}
		case <-ctx.Done():
			t.Fatalf("no %s in time; stderr: %s", what, p.stderr.String())
		}
	}
}

// requireExit checks that the process p exited with status want; err is
// what its Wait returned.
func requireExit(t *testing.T, want int, err error, p *proc) {
	t.Helper()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "exit status %d; stderr: %s", want, p.stderr.String())
	require.Equal(t, want, ee.ExitCode(), "stderr: %s", p.stderr.String())
}

// wait waits for the end of stdout and the process, and returns every chunk.
func (p *proc) wait(t *testing.T) ([]agent.Chunk, error) {
	t.Helper()
	for range p.chunks {
	}
	err := p.cmd.Wait()
	require.NoError(t, p.bad)
	return parseChunks(t, strings.Join(p.lines, "\n")+"\n"), err
}

func isState(name string, state agent.ToolState) func(agent.Chunk) bool {
	return func(c agent.Chunk) bool {
		return c.Kind == agent.KindToolCall && c.Tool.Name == name && c.Tool.State == state
	}
}

// sleepers returns the pids of the processes running "sleep secs".
func sleepers(t *testing.T, secs string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) == 2 && filepath.Base(argv[0]) == "sleep" && argv[1] == secs {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sleepSecs returns a sleep duration no other process uses, so that a test
// finds its sleep, and kills it at the end if it survived.
func sleepSecs(t *testing.T) string {
	secs := fmt.Sprintf("30.%09d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		for _, pid := range sleepers(t, secs) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return secs
}

// interruptWhenSleeping sends SIGINT to the CLI once the command's sleep runs.
func interruptWhenSleeping(ctx context.Context, t *testing.T, p *proc, secs string) {
	t.Helper()
	for len(sleepers(t, secs)) == 0 {
		require.NoError(t, ctx.Err(), "the command never started; stderr: %s", p.stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
}

// noSleeper checks that the sleep is gone (killed, perhaps not yet reaped).
func noSleeper(t *testing.T, secs string) {
	t.Helper()
	assert.Eventually(t, func() bool { return len(sleepers(t, secs)) == 0 }, 5*time.Second, 20*time.Millisecond,
		"no sleep survives the interrupted call")
}

func TestBinaryCtrlCInterruptsRunningCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("looks for the child in /proc")
	}
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	secs := sleepSecs(t)
	// A compound command: the shell forks the sleep, so only killing the
	// whole process group ends it.
	p := startCLI(ctx, t, "-yes", "-json", commandPrompt("sleep "+secs+"; echo done"))
	p.await(ctx, t, "executing chunk", isState("run_command", agent.StateExecuting))
	interruptWhenSleeping(ctx, t, p, secs)

	chunks, err := p.wait(t)
	require.NoError(t, ctx.Err(), "the CLI did not end after Ctrl-C; stderr: %s", p.stderr.String())
	requireExit(t, exitInterrupted, err, p)
	tr := trace(chunks)
	require.GreaterOrEqual(t, len(tr), 2)
	assert.Equal(t, []string{"rejected:run_command:" + agent.CauseInterrupted.DefaultReason(), "interrupted"}, tr[len(tr)-2:])
	assert.Contains(t, p.stderr.String(), "interrupting")
	noSleeper(t, secs)
}

func TestBinaryLoopCtrlCReturnsToPrompt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("looks for the child in /proc")
	}
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	secs := sleepSecs(t)
	p := startCLI(ctx, t, "-json") // the prompt loop, asking on the terminal
	write := func(s string) {
		_, err := io.WriteString(p.stdin, s)
		require.NoError(t, err)
	}

	write(commandPrompt("sleep "+secs+"; echo done") + "\n")
	p.await(ctx, t, "approval_required chunk", isState("run_command", agent.StateApprovalRequired))
	write("y\n")
	p.await(ctx, t, "executing chunk", isState("run_command", agent.StateExecuting))
	interruptWhenSleeping(ctx, t, p, secs)
	c := p.await(ctx, t, "tool_rejected chunk", func(c agent.Chunk) bool { return c.Kind == agent.KindToolRejected })
	assert.Equal(t, agent.CauseInterrupted.DefaultReason(), c.Tool.Reason)
	p.await(ctx, t, "interrupted chunk", func(c agent.Chunk) bool { return c.Kind == agent.KindInterrupted })
	noSleeper(t, secs)

	// Back at the prompt: the next line is a new turn, which continues the
	// conversation.
	write(helloPrompt + "\n")
	p.await(ctx, t, "no_tool planning round", func(c agent.Chunk) bool { return c.Kind == agent.KindRoundEnd && c.Intent == agent.IntentNoTool })
	p.await(ctx, t, "continuation round_end", func(c agent.Chunk) bool { return c.Kind == agent.KindRoundEnd && c.Round == 1 })
	require.NoError(t, p.stdin.Close()) // end of input ends the loop

	_, err := p.wait(t)
	require.NoError(t, ctx.Err(), "the CLI did not end at the end of its input; stderr: %s", p.stderr.String())
	require.NoError(t, err, "exit status 0; stderr: %s", p.stderr.String())
	assert.Contains(t, p.stderr.String(), "approve [y] / reject [n]")
	assert.Equal(t, 3, strings.Count(p.stderr.String(), "› "), "a prompt before each of the three reads")
}

func TestBinaryCtrlCAtPromptExitsQuietly(t *testing.T) {
	noModelEnv(t)
	buildCLI(t) // before the deadline starts: the first build may take long
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	p := startCLI(ctx, t, "-json") // the prompt loop
	for !strings.Contains(p.stderr.String(), "› ") {
		require.NoError(t, ctx.Err(), "no prompt; stderr: %s", p.stderr.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	for range p.chunks {
	}
	err := p.cmd.Wait()
	require.NoError(t, ctx.Err(), "the CLI did not end after Ctrl-C at the prompt; stderr: %s", p.stderr.String())
	require.NoError(t, err, "exit status 0, as for Ctrl-D; stderr: %s", p.stderr.String())
	assert.Empty(t, p.lines, "no run, no chunk")
	assert.NotContains(t, p.stderr.String(), "interrupting", "nothing runs, so nothing is being interrupted")
}
