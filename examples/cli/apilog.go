package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/planround/planround/memory"
)

// apiLogRows is how many model calls the -db file keeps in its API log (the
// newest; none older than memory.DefaultAPILogMaxAge). Each record holds
// the whole request, history included, so the store's default of 10,000
// would let a long conversation grow the file by gigabytes.
const apiLogRows = 1000

// callLog is the API log of the runs (agent.Config.APILog) when -db or -log
// is given: it keeps each record in the -db file's log, when there is one,
// and with -log prints the record's summary line (see summaryLine).
//
// The lines go to stderr, so stdout stays the transcript (or the JSON
// chunks), and through the screen: a record is appended by the goroutine
// of the run that made the call (a sub-agent's own goroutine for its
// calls) once the call's stream has ended, which may be in the middle of a
// line of streamed text or while a question waits for its answer. Owning
// the screen, the line starts on a line of its own and waits for the
// question, as a -v log record does.
//
// Without a store the records are numbered here, from 1, and not kept:
// APICalls finds none and APICall none either.
type callLog struct {
	store  memory.APILog // the -db file's log; nil: nothing is kept
	w      io.Writer     // where the lines go; nil: none are printed
	screen *screen
	seq    atomic.Int64 // the last number given without a store
}

func (l *callLog) AppendAPICall(ctx context.Context, c memory.APICall) (int64, error) {
	var (
		id  int64
		err error
	)
	if l.store != nil {
		id, err = l.store.AppendAPICall(ctx, c)
	} else {
		id = l.seq.Add(1)
	}
	if l.w != nil {
		line := summaryLine(id, c)
		if err != nil {
			// The agent logs the failure to -v's log too; said here, the
			// line does not name a record that is not there.
			line = "api (not recorded: " + oneLine(err.Error(), 200) + ") " + callSummary(c)
		}
		l.screen.own(func() { fmt.Fprintln(l.w, line) })
	}
	return id, err
}

func (l *callLog) APICalls(ctx context.Context, q memory.APICallQuery) ([]memory.APICall, error) {
	if l.store == nil {
		return nil, ctx.Err()
	}
	return l.store.APICalls(ctx, q)
}

func (l *callLog) APICall(ctx context.Context, id int64) (memory.APICall, error) {
	if l.store == nil {
		if err := ctx.Err(); err != nil {
			return memory.APICall{}, err
		}
		return memory.APICall{}, fmt.Errorf("api call %d: %w (the calls are not kept without -db)", id, memory.ErrNotFound)
	}
	return l.store.APICall(ctx, id)
}

func (l *callLog) DeleteAPICalls(ctx context.Context, q memory.APICallQuery) error {
	if l.store == nil {
		return ctx.Err()
	}
	return l.store.DeleteAPICalls(ctx, q)
}

// summaryLine is the line -log prints for the record id:
//
//	api #12 planning gpt-4o-mini 1,234→56 tok first 180ms total 1.2s ok
//	api #13 tool_round gpt-4o-mini ? tok first - total 2.0s error: 500 Internal Server Error: …
func summaryLine(id int64, c memory.APICall) string {
	return "api #" + strconv.FormatInt(id, 10) + " " + callSummary(c)
}

// callSummary is what summaryLine says of c after its id.
func callSummary(c memory.APICall) string {
	return string(c.Purpose) + " " + oneLine(c.Model, 80) + " " +
		tokens(c.Usage) + " tok first " + duration(c.FirstToken) + " total " + duration(c.Latency) + " " + status(c, 300)
}

// tokens is "input→output" with thousands separators, or "?" when the
// provider reported no usage.
func tokens(u memory.APIUsage) string {
	if u == (memory.APIUsage{}) {
		return "?"
	}
	return thousands(u.InputTokens) + "→" + thousands(u.OutputTokens)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

// duration is d for a person: "-" for none, "<1ms", "180ms", "1.2s", "14s".
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// status is "ok", or "error: " and the error's text on one line, cut to n
// characters.
func status(c memory.APICall, n int) string {
	if c.Status != memory.APICallError {
		return string(c.Status)
	}
	if c.Error == "" {
		return "error"
	}
	return "error: " + oneLine(c.Error, n)
}
