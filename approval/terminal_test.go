package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/internal/leaktest"
)

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// pipeTerminal returns a Terminal reading from a pipe; the test writes the
// answers to w. Both are closed at cleanup.
func pipeTerminal(t *testing.T) (*approval.Terminal, *io.PipeWriter, *lockedBuffer) {
	t.Helper()
	leaktest.Check(t)
	r, w := io.Pipe()
	out := new(lockedBuffer)
	term := approval.NewTerminal(r, out)
	t.Cleanup(func() {
		w.Close()
		term.Close()
	})
	return term, w, out
}

func commandCall() agent.ApprovalRequest {
	return agent.ApprovalRequest{
		SessionID: "cli",
		Round:     1,
		Call:      agent.ToolCall{ID: "call_1", Name: "run_command", Arguments: json.RawMessage(`{"command":"ls","dir":"/tmp"}`)},
	}
}

// anonymous returns d without its By and Via, after checking them: a
// person's answer (no Cause) is taken at the terminal by the user the
// process runs as, and any other carries neither.
func anonymous(t *testing.T, d agent.Decision) agent.Decision {
	t.Helper()
	if d.Cause == "" {
		assert.Equal(t, approval.ViaTerminal, d.Via, "a person's answer comes through the terminal")
		assert.NotEmpty(t, d.By, "a person's answer names the person")
	} else {
		assert.Empty(t, d.By+d.Via, "not a person's answer")
	}
	d.By, d.Via = "", ""
	return d
}

func TestTerminalAnswers(t *testing.T) {
	tests := []struct {
		name    string
		input   string // written, then the input ends
		want    agent.Decision
		reasked int // how many times the answer is asked again
	}{
		{"y", "y\n", agent.Decision{Approved: true}, 0},
		{"yes in capitals", "YES\n", agent.Decision{Approved: true}, 0},
		{"always", "a\n", agent.Decision{Approved: true, Scope: agent.ScopeAlways}, 0},
		{"n", "n\n", agent.Decision{Reason: "rejected by user"}, 0},
		{"n with reason", "n too risky\n", agent.Decision{Reason: "rejected by user: too risky"}, 0},
		{"no: reason", "no: not now\n", agent.Decision{Reason: "rejected by user: not now"}, 0},
		{"asked again", "maybe\n\n  y  \n", agent.Decision{Approved: true}, 2},
		{"last line without newline", "y", agent.Decision{Approved: true}, 0},
		{"windows line end", "y\r\n", agent.Decision{Approved: true}, 0},
		{"end of input", "", agent.Decision{Reason: approval.ReasonEndOfInput, Cause: agent.CauseApprovalFailed}, 0},
		{"end of input after junk", "what\n", agent.Decision{Reason: approval.ReasonEndOfInput, Cause: agent.CauseApprovalFailed}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term, w, out := pipeTerminal(t)
			go func() {
				io.WriteString(w, tt.input)
				w.Close()
			}()
			got, err := decide(context.Background(), term, commandCall())
			require.NoError(t, err)
			assert.Equal(t, tt.want, anonymous(t, got))
			text := out.String()
			for _, want := range []string{
				"run_command",
				`"command": "ls"`,
				"approve [y] / reject [n] / always approve this tool [a]",
			} {
				assert.Contains(t, text, want)
			}
			if got := strings.Count(text, "please answer"); got != tt.reasked {
				t.Errorf("asked again %d times, want %d; output:\n%s", got, tt.reasked, text)
			}
		})
	}
}

func TestTerminalAlwaysAndEndOfInput(t *testing.T) {
	term, w, out := pipeTerminal(t)
	go io.WriteString(w, "a\n")
	d, err := decide(context.Background(), term, commandCall())
	require.NoError(t, err)
	require.True(t, d.Approved)

	// The tool is remembered: no prompt, no input needed, a decision taken
	// at once (no approval card).
	before := strings.Count(out.String(), "approve [y]")
	tk, err := term.Request(context.Background(), commandCall())
	require.NoError(t, err)
	d, decided := tk.Decision()
	assert.True(t, decided, "decided at once")
	assert.Equal(t, agent.Decision{Approved: true, Scope: agent.ScopeAlways}, anonymous(t, d))
	assert.Equal(t, before, strings.Count(out.String(), "approve [y]"), "no second prompt")
	assert.Contains(t, out.String(), "run_command: approved (always)")

	// Another tool is asked; after the end of input every call is rejected.
	other := commandCall()
	other.Call.Name = "delete_file"
	w.Close()
	for range 2 {
		d, err = decide(context.Background(), term, other)
		require.NoError(t, err)
		assert.Equal(t, agent.Decision{Reason: approval.ReasonEndOfInput, Cause: agent.CauseApprovalFailed}, d)
	}
}

func TestTerminalContextEnds(t *testing.T) {
	term, w, out := pipeTerminal(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outcome, 1)
	go func() {
		d, err := decide(ctx, term, commandCall())
		done <- outcome{d, err}
	}()
	// Wait for the prompt, then cancel while Wait waits for input.
	waitFor(t, func() bool { return strings.Contains(out.String(), "approve [y]") })
	cancel()
	got := <-done
	assert.ErrorIs(t, got.err, context.Canceled)
	assert.Equal(t, cancelledDecision, got.d)

	// The Terminal still works: a line typed now answers the next prompt.
	go io.WriteString(w, "n later\n")
	d, err := decide(context.Background(), term, commandCall())
	require.NoError(t, err)
	assert.Equal(t, "rejected by user: later", d.Reason)
}

func TestTerminalConcurrentPrompts(t *testing.T) {
	term, w, out := pipeTerminal(t)
	var wg sync.WaitGroup
	results := make([]agent.Decision, 2)
	for i := range 2 {
		wg.Go(func() {
			req := commandCall()
			req.Call.Name = []string{"tool_a", "tool_b"}[i]
			d, err := decide(context.Background(), term, req)
			if err != nil {
				t.Errorf("Approve %d: %v", i, err)
			}
			results[i] = d
		})
	}
	// Answer each prompt only once it is shown: one at a time.
	for n := 1; n <= 2; n++ {
		waitFor(t, func() bool { return strings.Count(out.String(), "approve [y]") == n })
		io.WriteString(w, "y\n")
	}
	wg.Wait()
	assert.True(t, results[0].Approved && results[1].Approved, "both approved: %+v", results)
	text := out.String()
	a, b := strings.Index(text, "tool_a"), strings.Index(text, "tool_b")
	require.True(t, a >= 0 && b >= 0, "both prompts shown:\n%s", text)
	first, second := min(a, b), max(a, b)
	assert.Equal(t, 1, strings.Count(text[first:second], "approve [y]"), "prompts must not interleave:\n%s", text)
}

func TestTerminalClose(t *testing.T) {
	term, _, _ := pipeTerminal(t)
	done := make(chan outcome, 1)
	go func() {
		d, err := decide(context.Background(), term, commandCall())
		done <- outcome{d, err}
	}()
	time.Sleep(10 * time.Millisecond) // let it wait; the result is the same either way
	require.NoError(t, term.Close())
	got := <-done
	assert.ErrorIs(t, got.err, approval.ErrTerminalClosed)
	assert.False(t, got.d.Approved)
	_, err := decide(context.Background(), term, commandCall())
	assert.ErrorIs(t, err, approval.ErrTerminalClosed)
	assert.NoError(t, term.Close(), "second Close")
}

func TestTerminalReadError(t *testing.T) {
	term, w, _ := pipeTerminal(t)
	boom := errors.New("boom")
	w.CloseWithError(boom)
	_, err := decide(context.Background(), term, commandCall())
	assert.ErrorIs(t, err, boom)
}

func TestTerminalArgumentsShown(t *testing.T) {
	tests := []struct {
		name string
		call agent.ToolCall
		want string
	}{
		{"indented JSON", agent.ToolCall{Name: "t", Arguments: json.RawMessage(`{"a":{"b":1}}`)}, "{\n    \"a\": {\n      \"b\": 1\n    }\n  }"},
		{"raw text", agent.ToolCall{Name: "t", ArgumentsRaw: "{not json"}, "with:\n  {not json"},
		{"none", agent.ToolCall{Name: "t"}, "without arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			var out bytes.Buffer
			term := approval.NewTerminal(strings.NewReader("y\n"), &out)
			_, err := decide(context.Background(), term, agent.ApprovalRequest{Call: tt.call})
			require.NoError(t, err)
			assert.Contains(t, out.String(), tt.want)
			term.Close()
		})
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// lines is a line source for NewTerminalFunc: it hands out queued lines,
// then io.EOF, and honours ctx while it waits for one.
type lines struct {
	ch    chan string
	calls int
}

func (l *lines) next(ctx context.Context) (string, error) {
	l.calls++
	select {
	case s, ok := <-l.ch:
		if !ok {
			return "", io.EOF
		}
		return s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func TestTerminalFunc(t *testing.T) {
	src := &lines{ch: make(chan string, 4)}
	var out lockedBuffer
	term := approval.NewTerminalFunc(src.next, &out)
	req := agent.ApprovalRequest{Call: agent.ToolCall{ID: "c1", Name: "run_command", Arguments: json.RawMessage(`{"command":"ls"}`)}}

	src.ch <- "maybe"
	src.ch <- "n too risky"
	d, err := decide(context.Background(), term, req)
	require.NoError(t, err)
	assert.False(t, d.Approved)
	assert.Equal(t, "rejected by user: too risky", d.Reason)
	assert.Equal(t, 2, src.calls, "asked again after an answer it did not understand")
	assert.Contains(t, out.String(), "run_command")

	// While a prompt waits, ctx ends: no line is taken from the source.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d, err := decide(ctx, term, req)
		assert.ErrorIs(t, err, context.Canceled)
		assert.False(t, d.Approved)
	}()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "run_command") >= 2 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	src.ch <- "y"
	d, err = decide(context.Background(), term, req)
	require.NoError(t, err)
	assert.True(t, d.Approved, "the line typed after the cancel answers the next prompt")

	close(src.ch)
	d, err = decide(context.Background(), term, req)
	require.NoError(t, err)
	assert.Equal(t, approval.ReasonEndOfInput, d.Reason)
}
