package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// childArgsEnv names, in a process that a test starts as a web chat, its
// command-line arguments, as a JSON array.
const childArgsEnv = "WEBCHAT_TEST_CHILD_ARGS"

// childMain is the web chat's main in a child process of a test: the test
// binary started again with childArgsEnv set, so the program the tests
// start, kill and restart is the code under test, built as the tests are
// (with -race when they are).
func childMain(args string) int {
	var list []string
	if err := json.Unmarshal([]byte(args), &list); err != nil {
		fmt.Fprintf(os.Stderr, "webchat test child: %s: %v\n", childArgsEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, list, os.Stdout, os.Stderr, nil)
}

// child is a web chat process started by a test.
type child struct {
	cmd    *exec.Cmd
	url    string // the page's address, without the trailing slash
	stderr *syncBuffer
	exited chan struct{} // closed once the process ended and was waited for
	err    error         // its exit error, once exited is closed
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startChild starts a web chat process on the demo model, listening on a
// port of 127.0.0.1 of its own, with args, and waits until it listens. It is
// killed, if still running, when t ends.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	return startChildEnv(t, nil, args...)
}

// startChildEnv is startChild with the environment variables env
// ("KEY=value") added, such as OPENAI_BASE_URL for a model of the test's.
func startChildEnv(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OPENAI_") || k == childArgsEnv {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	all := append([]string{"-addr", "127.0.0.1:0"}, args...)
	cmd.Env = append(cmd.Env, childArgsEnv+"="+mustString(all))
	c := &child{cmd: cmd, stderr: new(syncBuffer), exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "webchat: listening on "); ok {
				listening <- strings.TrimSuffix(u, "/")
			}
		}
		c.err = cmd.Wait() // after the last read of stdout
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			cmd.Process.Kill() //nolint:errcheck // it may end by itself meanwhile
			<-c.exited
		}
	})
	select {
	case c.url = <-listening:
	case <-c.exited:
		t.Fatalf("the web chat ended before it listened: %v\n%s", c.err, c.stderr)
	case <-time.After(waitLimit):
		t.Fatalf("the web chat did not listen within %v\n%s", waitLimit, c.stderr)
	}
	return c
}

// stop sends sig to the process and waits for it to end; it returns its
// exit error (nil for status 0).
func (c *child) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(sig))
	select {
	case <-c.exited:
		return c.err
	case <-time.After(waitLimit):
		t.Fatalf("the web chat did not end within %v after %v\n%s", waitLimit, sig, c.stderr)
	}
	return nil
}

// browserOf returns a client with a cookie jar of its own that loaded the
// page at base, and so holds an owner cookie. Cookies are not kept per
// port: the client is the same browser for every server on 127.0.0.1.
func browserOf(t *testing.T, base string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Transport: &http.Transport{}, Jar: jar}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return c
}

// TestRestartOnSQLite: a web chat process on a SQLite file stops while a
// run waits for a decision (SIGTERM suspends it, SIGKILL kills it) or
// while the approved tool runs (SIGKILL); a new process on the same file
// shows the waiting card in the history, a decision posted to it resumes
// the turn on the page's event stream, and the tool runs once: a call cut
// by the kill is reported as stopped, never run again.
func TestRestartOnSQLite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sig       syscall.Signal
		executing bool // killed while the tool runs, not while it waits
	}{
		{"SIGTERM while waiting", syscall.SIGTERM, false},
		{"SIGKILL while waiting", syscall.SIGKILL, false},
		{"SIGKILL while executing", syscall.SIGKILL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			db := filepath.Join(t.TempDir(), "chat.db")
			message, ran := markerCommand(t)
			if tc.executing {
				message = strings.TrimSuffix(message, "`") + "; echo started; sleep 30`"
			}
			// A lease of a killed process ends within a second, and the
			// sweeper looks often.
			args := []string{"-db", db, "-lease-ttl", "1s", "-sweep-interval", "100ms"}

			a := startChild(t, args...)
			client := browserOf(t, a.url)
			s1 := postSession(t, client, a.url)
			ev, _ := openEventsAt(t, client, a.url, s1, "after=0")
			status, out := postAs(t, client, a.url, "/api/chat", mustString(map[string]string{"session_id": s1, "message": message}))
			require.Equal(t, http.StatusAccepted, status, "%v", out)
			call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
			if tc.executing {
				status, out := postAs(t, client, a.url, "/api/tool-approve", approveBody(s1, call, true, nil))
				require.Equal(t, http.StatusOK, status, "%v", out)
				ev.until(t, func(e sseEvent) bool {
					return e.name == "" && strings.Contains(e.chunk(t).Tool.PartialResult, "started")
				})
				require.Equal(t, 1, ran())
			}

			err := a.stop(t, tc.sig)
			if tc.sig == syscall.SIGTERM {
				require.NoError(t, err, "exit status 0 after SIGTERM\n%s", a.stderr)
				done, chunks := ev.runDone(t)
				assert.Equal(t, runDone{Status: "suspended", Reason: reasonShutdown}, done)
				assert.Equal(t, agent.KindSuspended, chunks[len(chunks)-1].Kind)
			} else {
				var exit *exec.ExitError
				require.True(t, errors.As(err, &exit), "%v", err)
				ev.ended(t)
			}

			b := startChild(t, args...)
			if !tc.executing {
				// The killed process's turn looks in progress until its
				// lease ends; then the new process ends it (suspended).
				var (
					hist    []historyEntry
					seq     int64
					running = true
				)
				deadline := time.Now().Add(waitLimit)
				for running && time.Now().Before(deadline) {
					if hist, seq, running = historyAt(t, client, b.url, s1); running {
						time.Sleep(50 * time.Millisecond)
					}
				}
				assert.False(t, running)
				var open []openCall
				for _, e := range hist {
					open = append(open, e.OpenCalls...)
				}
				require.Len(t, open, 1, "the waiting card, in the history of the restarted server: %+v", hist)
				assert.Equal(t, openCall{CallID: call.ID, State: "approval", ApprovalID: call.ApprovalID, Tool: call.Name, ArgumentsDigest: call.ArgumentsDigest}, open[0])
				ev2, _ := openEventsAt(t, client, b.url, s1, "after="+strconv.FormatInt(seq, 10))
				status, out := postAs(t, client, b.url, "/api/tool-approve", approveBody(s1, call, true, nil))
				require.Equal(t, http.StatusOK, status, "%v", out)
				assert.Equal(t, true, out["success"], "the card is answerable after the restart: %v", out)
				started := ev2.next(t)
				require.Equal(t, "run_started", started.name, "%v", started)
				assert.Contains(t, started.data, `"resumed":true`)
				done, chunks := ev2.runDone(t)
				assert.Equal(t, "finished", done.Status, "%+v\n%s", done, b.stderr)
				assert.Contains(t, summary(chunks), "result run_command")
			} else {
				// Nobody decides anything: the sweeper resumes the turn, from
				// the start of the new process's log.
				// The killed process's turn comes first, ended by the new
				// one as its process stopped.
				ev2, _ := openEventsAt(t, client, b.url, s1, "after=0")
				done, _ := ev2.runDone(t)
				assert.Equal(t, runDone{Status: "suspended", Reason: reasonStopped}, done)
				done, chunks := ev2.runDone(t)
				assert.Equal(t, "finished", done.Status, "%+v\n%s", done, b.stderr)
				var stopped *agent.ToolCall
				for _, c := range chunks {
					if c.Kind == agent.KindToolRejected && c.Tool.ID == call.ID {
						stopped = c.Tool
					}
				}
				require.NotNil(t, stopped, "the cut call is reported: %v", summary(chunks))
				assert.Equal(t, agent.CauseStopped, stopped.Cause)
			}
			assert.Equal(t, 1, ran(), "the tool ran once")

			hist, _, running := historyAt(t, client, b.url, s1)
			assert.False(t, running)
			for _, e := range hist {
				assert.Empty(t, e.OpenCalls, "nothing open once the turn ended: %+v", e)
			}
			var calls, results int
			for _, e := range hist {
				calls += len(e.ToolCalls)
				if e.Role == "tool" {
					results++
				}
			}
			assert.Equal(t, calls, results, "every call has its tool message: %+v", hist)
			require.NoError(t, b.stop(t, syscall.SIGTERM), "%s", b.stderr)
		})
	}
}

// ended reads the stream until it ends, which must be soon.
func (ev *events) ended(t *testing.T) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case _, ok := <-ev.ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the event stream did not end")
		}
	}
}
