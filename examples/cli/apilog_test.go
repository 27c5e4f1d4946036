package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// summary is a line of -log, parsed.
type summary struct {
	id                          int64
	purpose, model, tok, status string
}

// summaryRE matches a line of -log; the timings vary.
var summaryRE = regexp.MustCompile(`^api #(\d+) (\S+) (\S+) (\S+) tok first (-|<1ms|\d+ms|[\d.]+s) total (<1ms|\d+ms|[\d.]+s|\S+) (ok|error: .+)$`)

// summaries returns the -log lines of stderr, checking each is whole.
func summaries(t *testing.T, stderr string) []summary {
	t.Helper()
	var out []summary
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "api #") {
			continue
		}
		m := summaryRE.FindStringSubmatch(line)
		require.NotNil(t, m, "not a whole summary line: %q\nstderr:\n%s", line, stderr)
		id, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		out = append(out, summary{id: id, purpose: m[2], model: m[3], tok: m[4], status: m[7]})
	}
	return out
}

// listed is a row of cli logs, parsed.
type listed struct {
	id, session, round, purpose, model, tok, status string
}

// listRows parses the output of cli logs: a header, then a row per record.
func listRows(t *testing.T, stdout string) []listed {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.NotEmpty(t, lines)
	require.Equal(t, []string{"ID", "STARTED", "SESSION", "ROUND", "PURPOSE", "MODEL", "TOKENS", "FIRST", "TOTAL", "STATUS"}, strings.Fields(lines[0]))
	var rows []listed
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.GreaterOrEqual(t, len(f), 11, "row %q", l)
		// STARTED is a date and a time.
		rows = append(rows, listed{id: f[0], session: f[3], round: f[4], purpose: f[5], model: f[6], tok: f[7], status: strings.Join(f[10:], " ")})
	}
	return rows
}

func column(rows []listed, f func(listed) string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, f(r))
	}
	return out
}

// A run with -db and -log on a real HTTP model: one summary line per model
// call, the researcher's own calls included; cli logs lists the records
// newest first and shows each request and reply; the API key is in none of
// it.
func TestLogAndLogsOfARun(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	secret := "sk-secret-" + hex.EncodeToString(key)
	t.Setenv("OPENAI_API_KEY", secret)

	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.RequireAPIKey(secret) // the run sent it, or it would have failed
	srv.Enqueue(
		agenttest.Reply().Text("I will ask the researcher. ", "<need_tool>").Usage(1234, 56).Finish("stop"),
		agenttest.Reply().Call(0, "call_r", "researcher", `{"task":"Find the weather in Oslo."}`).Usage(1300, 20).Finish("tool_calls"),
		// The researcher's rounds: its own tool call, then its answer.
		agenttest.Reply().Call(0, "call_w", "get_weather", `{"city":`, `"Oslo"}`).Usage(300, 10).Finish("tool_calls"),
		agenttest.Reply().Text("Oslo is cloudy.").Usage(350, 5).Finish("stop"),
		agenttest.Reply().Text("It is cloudy in Oslo.").Usage(1400, 8).Finish("stop"),
	)
	dir := t.TempDir()
	db := filepath.Join(dir, "chat.db")

	r := runCLI(t, "", "-db", db, "-log", "-yes", "-base-url", srv.URL(), "-model", "m", "What's the weather in Oslo?")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	require.Len(t, srv.Requests(), 5)
	assert.Equal(t, []summary{
		{1, "planning", "m", "1,234→56", "ok"},
		{2, "tool_round", "m", "1,300→20", "ok"},
		{3, "sub_agent", "m", "300→10", "ok"},
		{4, "sub_agent", "m", "350→5", "ok"},
		{5, "tool_round", "m", "1,400→8", "ok"},
	}, summaries(t, r.stderr), "stderr:\n%s", r.stderr)
	assert.NotContains(t, r.stdout, "api #", "the lines go to stderr, not into the transcript")

	l := runCLI(t, "", "logs", "-db", db)
	require.Equal(t, exitOK, l.code, "stderr: %s", l.stderr)
	rows := listRows(t, l.stdout)
	assert.Equal(t, []string{"5", "4", "3", "2", "1"}, column(rows, func(r listed) string { return r.id }), "newest first:\n%s", l.stdout)
	assert.Equal(t, []string{"tool_round", "sub_agent", "sub_agent", "tool_round", "planning"}, column(rows, func(r listed) string { return r.purpose }))
	assert.Equal(t, []string{"1,400→8", "350→5", "300→10", "1,300→20", "1,234→56"}, column(rows, func(r listed) string { return r.tok }))
	for _, row := range rows {
		assert.Equal(t, "default", row.session, "the records carry the run's session (the researcher's its caller's)")
		assert.Equal(t, "m", row.model)
		assert.Equal(t, "ok", row.status)
	}
	assert.Equal(t, "0", rows[4].round)
	assert.Equal(t, "1", rows[3].round)
	assert.Equal(t, "2", rows[0].round)

	n := runCLI(t, "", "logs", "-db", db, "-n", "2", "-session", "default")
	require.Equal(t, exitOK, n.code, "stderr: %s", n.stderr)
	assert.Equal(t, []string{"5", "4"}, column(listRows(t, n.stdout), func(r listed) string { return r.id }))
	none := runCLI(t, "", "logs", "-db", db, "-session", "other")
	assert.Equal(t, exitOK, none.code)
	assert.Empty(t, none.stdout)
	assert.Equal(t, "cli: logs: no model call recorded in "+db+" for session other\n", none.stderr)

	// The flags may follow the command.
	s2 := runCLI(t, "", "logs", "show", "2", "-db", db)
	require.Equal(t, exitOK, s2.code, "stderr: %s", s2.stderr)
	assert.Regexp(t, `(?m)^id: +2$`, s2.stdout)
	assert.Regexp(t, `(?m)^purpose: +tool_round$`, s2.stdout)
	assert.Regexp(t, `(?m)^finish reason: +tool_calls$`, s2.stdout)
	assert.Regexp(t, `(?m)^tokens: +1,300 in, 20 out$`, s2.stdout)
	assert.Contains(t, s2.stdout, "\nrequest:\n{\n  ", "the request, indented")
	assert.Contains(t, s2.stdout, "\n  \"model\": \"m\",\n")
	assert.Contains(t, s2.stdout, `"content": "What's the weather in Oslo?"`)
	assert.Contains(t, s2.stdout, `"name": "researcher"`, "the tools offered")
	assert.True(t, strings.HasSuffix(s2.stdout, "\nreply:\n\ntool calls:\n  researcher (call_r) {\"task\":\"Find the weather in Oslo.\"}\n"), "stdout:\n%s", s2.stdout)
	assert.Less(t, strings.Index(s2.stdout, "request:"), strings.Index(s2.stdout, "reply:"))

	s1 := runCLI(t, "", "logs", "-db", db, "show", "1")
	require.Equal(t, exitOK, s1.code, "stderr: %s", s1.stderr)
	assert.Regexp(t, `(?m)^purpose: +planning$`, s1.stdout)
	assert.Contains(t, s1.stdout, "\nreply:\nI will ask the researcher. <need_tool>\n", "the reply as the model wrote it")
	assert.NotContains(t, s1.stdout, "tool calls:")

	s3 := runCLI(t, "", "logs", "-db", db, "show", "3")
	require.Equal(t, exitOK, s3.code, "stderr: %s", s3.stderr)
	assert.Regexp(t, `(?m)^purpose: +sub_agent$`, s3.stdout)
	assert.Contains(t, s3.stdout, "Find the weather in Oslo.", "the researcher was sent its task")
	assert.Contains(t, s3.stdout, "\ntool calls:\n  get_weather (call_w) {\"city\":\"Oslo\"}\n")

	// The key travels in a header: it is in neither the file nor what
	// cli logs shows.
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		require.NoError(t, err)
		assert.NotContains(t, string(b), secret, "the key in %s", f.Name())
		assert.NotContains(t, string(b), hex.EncodeToString(key), "a part of the key in %s", f.Name())
	}
	all := l.stdout + s1.stdout + s2.stdout + s3.stdout
	for id := 4; id <= 5; id++ {
		s := runCLI(t, "", "logs", "-db", db, "show", strconv.Itoa(id))
		require.Equal(t, exitOK, s.code, "stderr: %s", s.stderr)
		all += s.stdout + s.stderr
	}
	assert.NotContains(t, all, secret)
	assert.NotContains(t, all, hex.EncodeToString(key))
}

// A failed call is recorded and printed with its error.
func TestLogShowsAFailedCall(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	srv := agenttest.NewServer()
	t.Cleanup(srv.Close)
	srv.Enqueue(agenttest.HTTPError(500, "the model is on fire"))
	db := filepath.Join(t.TempDir(), "chat.db")

	r := runCLI(t, "", "-db", db, "-log", "-retries", "0", "-base-url", srv.URL(), "-model", "m", helloPrompt)
	assert.Equal(t, exitError, r.code)
	s := summaries(t, r.stderr)
	require.Len(t, s, 1, "stderr: %s", r.stderr)
	assert.Equal(t, "planning", s[0].purpose)
	assert.Equal(t, "?", s[0].tok, "no usage came")
	assert.Contains(t, s[0].status, "error: ")
	assert.Contains(t, s[0].status, "the model is on fire")
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	require.Len(t, lines, 2, "the summary, then the run's error: %q", r.stderr)
	assert.True(t, strings.HasPrefix(lines[1], "cli: agent: round 0: model request failed: 500"), "stderr: %q", r.stderr)

	l := runCLI(t, "", "logs", "-db", db)
	require.Equal(t, exitOK, l.code, "stderr: %s", l.stderr)
	rows := listRows(t, l.stdout)
	require.Len(t, rows, 1)
	assert.Contains(t, rows[0].status, "error: ")
	assert.Contains(t, rows[0].status, "the model is on fire")

	show := runCLI(t, "", "logs", "-db", db, "show", "1")
	require.Equal(t, exitOK, show.code, "stderr: %s", show.stderr)
	assert.Regexp(t, `(?m)^status: +error: .*the model is on fire`, show.stdout)
	assert.Regexp(t, `(?m)^tokens: +not reported$`, show.stdout)
	assert.Contains(t, show.stdout, "\nreply:\n  (nothing)\n")
}

// -log without -db prints the lines, numbered by the process, and keeps
// nothing; -db without -log keeps the records and prints nothing.
func TestLogWithoutDBAndDBWithoutLog(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	r := runCLI(t, "", "-log", "-json", helloPrompt)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	parseChunks(t, r.stdout) // stdout is still nothing but chunks
	s := summaries(t, r.stderr)
	require.Len(t, s, 2, "stderr: %s", r.stderr)
	assert.Equal(t, summary{1, "planning", "planround-demo", s[0].tok, "ok"}, s[0])
	assert.Equal(t, summary{2, "continuation", "planround-demo", s[1].tok, "ok"}, s[1])

	db := filepath.Join(t.TempDir(), "chat.db")
	q := runCLI(t, "", "-db", db, "-session", "s1", helloPrompt)
	require.Equal(t, exitOK, q.code, "stderr: %s", q.stderr)
	assert.NotContains(t, q.stderr, "api #")
	l := runCLI(t, "", "logs", "-db", db)
	require.Equal(t, exitOK, l.code, "stderr: %s", l.stderr)
	rows := listRows(t, l.stdout)
	assert.Equal(t, []string{"continuation", "planning"}, column(rows, func(r listed) string { return r.purpose }))
	assert.Equal(t, []string{"s1", "s1"}, column(rows, func(r listed) string { return r.session }))
}

func TestLogsDelete(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	db := filepath.Join(t.TempDir(), "chat.db")
	for _, s := range []string{"s1", "s2"} {
		r := runCLI(t, "", "-db", db, "-session", s, helloPrompt)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	}
	sessions := func() []string {
		l := runCLI(t, "", "logs", "-db", db)
		require.Equal(t, exitOK, l.code, "stderr: %s", l.stderr)
		if l.stdout == "" {
			return nil
		}
		return column(listRows(t, l.stdout), func(r listed) string { return r.session })
	}
	require.Equal(t, []string{"s2", "s2", "s1", "s1"}, sessions())

	d := runCLI(t, "", "logs", "-db", db, "delete", "-session", "s1")
	require.Equal(t, exitOK, d.code, "stderr: %s", d.stderr)
	assert.Equal(t, "cli: logs: deleted the records of session s1 in "+db+"\n", d.stderr)
	assert.Equal(t, []string{"s2", "s2"}, sessions())

	d = runCLI(t, "", "logs", "-db", db, "delete")
	require.Equal(t, exitOK, d.code, "stderr: %s", d.stderr)
	assert.Empty(t, sessions())
}

func TestLogsErrors(t *testing.T) {
	leaktest.Check(t)
	noModelEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "chat.db")
	r := runCLI(t, "", "-db", db, helloPrompt)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	missing := filepath.Join(dir, "missing.db")
	notDB := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notDB, []byte("not a database\n"), 0o600))
	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // stderr holds it
	}{
		{"missing file", []string{"-db", missing}, exitError, "cli: logs: " + missing + ": no such file (give the -db file of a run)\n"},
		{"missing file, show", []string{"-db", missing, "show", "1"}, exitError, "cli: logs: " + missing + ": no such file"},
		{"a folder", []string{"-db", dir}, exitError, "cli: logs: " + dir + " is a folder"},
		{"not a database", []string{"-db", notDB}, exitError, notDB},
		{"empty file", []string{"-db", empty}, exitError, "cli: logs: " + empty + " is empty, not the -db file of a run\n"},
		{"unknown id", []string{"-db", db, "show", "99"}, exitError, "cli: logs: no record 99 in " + db + " (cli logs -db " + db + " lists them)\n"},
		{"no -db", []string{"show", "1"}, exitUsage, "cli: logs: -db is required"},
		{"bad flag", []string{"-db", db, "-nope"}, exitUsage, "flag provided but not defined: -nope"},
		{"bad -n", []string{"-db", db, "-n", "many"}, exitUsage, "invalid value \"many\" for flag -n"},
		{"negative -n", []string{"-db", db, "-n", "-1"}, exitUsage, "cli: logs: -n must not be negative\n"},
		{"not an id", []string{"-db", db, "show", "x"}, exitUsage, "cli: logs: show: \"x\" is not a record id"},
		{"zero id", []string{"-db", db, "show", "0"}, exitUsage, "cli: logs: show: \"0\" is not a record id"},
		{"show without id", []string{"-db", db, "show"}, exitUsage, "cli: logs: show takes one record id"},
		{"show with -n", []string{"-db", db, "-n", "3", "show", "1"}, exitUsage, "cli: logs: show takes no -n or -session"},
		{"delete with -n", []string{"-db", db, "-n", "3", "delete"}, exitUsage, "cli: logs: delete takes no -n"},
		{"unknown command", []string{"-db", db, "shw", "1"}, exitUsage, "cli: logs: unknown command \"shw\" (list, show ID or delete)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"logs"}, tc.args...)...)
			assert.Equal(t, tc.code, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, os.ErrNotExist, "reading the logs of a missing file does not create it")
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "nor makes a database of an empty file")

	t.Run("help", func(t *testing.T) {
		r := runCLI(t, "", "logs", "-h")
		assert.Equal(t, exitOK, r.code)
		assert.Contains(t, r.stderr, "usage: cli logs -db FILE")
		assert.Contains(t, r.stderr, "\n  1  the file does not exist or cannot be read, or no record has the id\n")
		m := runCLI(t, "", "-h")
		assert.Contains(t, m.stderr, "  -log\n")
		assert.Contains(t, m.stderr, "cli logs -db FILE show ID")
	})
	t.Run("a prompt that is the word logs", func(t *testing.T) {
		r := runCLI(t, "", "-json", "--", "logs")
		assert.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		parseChunks(t, r.stdout)
	})
}

func TestSummaryFormats(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {1234, "1,234"}, {123456, "123,456"}, {1234567, "1,234,567"}, {-1234, "-1,234"}} {
		assert.Equal(t, tc.want, thousands(tc.n), "thousands(%d)", tc.n)
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "-"}, {500 * time.Microsecond, "<1ms"}, {180 * time.Millisecond, "180ms"}, {999 * time.Millisecond, "999ms"},
		{1200 * time.Millisecond, "1.2s"}, {9940 * time.Millisecond, "9.9s"}, {14 * time.Second, "14s"}, {75 * time.Second, "1m15s"},
	} {
		assert.Equal(t, tc.want, duration(tc.d), "duration(%v)", tc.d)
	}
	c := memory.APICall{Purpose: memory.PurposePlanning, Model: "gpt-4o-mini", Usage: memory.APIUsage{InputTokens: 1234, OutputTokens: 56},
		FirstToken: 180 * time.Millisecond, Latency: 1200 * time.Millisecond, Status: memory.APICallOK}
	assert.Equal(t, "api #12 planning gpt-4o-mini 1,234→56 tok first 180ms total 1.2s ok", summaryLine(12, c))
	c.Status, c.Error, c.Usage, c.FirstToken = memory.APICallError, "500 Internal Server Error:\nthe model is on fire", memory.APIUsage{}, 0
	assert.Equal(t, "api #13 planning gpt-4o-mini ? tok first - total 1.2s error: 500 Internal Server Error: the model is on fire", summaryLine(13, c))
}

// failingLog is an APILog whose appends fail.
type failingLog struct{ memory.APILog }

func (failingLog) AppendAPICall(context.Context, memory.APICall) (int64, error) {
	return 0, errors.New("disk full")
}

// A record the store refused is printed all the same, without an id that
// names nothing, and the failure goes back to the agent (which logs it).
func TestLogLineWhenTheStoreFails(t *testing.T) {
	var out strings.Builder
	l := &callLog{store: failingLog{}, w: &out, screen: newScreen(func() {})}
	c := memory.APICall{Purpose: memory.PurposeToolRound, Model: "m", Status: memory.APICallOK, Latency: time.Second}
	_, err := l.AppendAPICall(t.Context(), c)
	require.EqualError(t, err, "disk full")
	assert.Equal(t, "api (not recorded: disk full) tool_round m ? tok first - total 1.0s ok\n", out.String())

	// Without a store the process numbers the calls.
	out.Reset()
	l = &callLog{w: &out, screen: newScreen(func() {})}
	for range 2 {
		_, err := l.AppendAPICall(t.Context(), c)
		require.NoError(t, err)
	}
	assert.Equal(t, "api #1 tool_round m ? tok first - total 1.0s ok\napi #2 tool_round m ? tok first - total 1.0s ok\n", out.String())
	_, err = l.APICall(t.Context(), 1)
	assert.ErrorIs(t, err, memory.ErrNotFound, "nothing is kept")
}
