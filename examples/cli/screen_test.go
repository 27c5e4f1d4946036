package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
)

// question is how the terminal approver's question ends, where the cursor
// waits for the answer.
const question = "approve [y] / reject [n] / always approve this tool [a]: "

// vt is the screen of a terminal that stdout and stderr share, with a
// person in front of it: when a question has been written, the person reads
// it for a moment and types the next answer, which the terminal echoes where
// the cursor is and sends to stdin.
type vt struct {
	tty   bool          // stdout says it is a terminal (see isTerminal)
	think time.Duration // how long the person reads a question
	// lag is how late a sub-agent's call line reaches the screen when no
	// question has come meanwhile: the race between the transcript and the
	// questions, written by other goroutines, made to go the wrong way
	// whenever the program lets it.
	lag time.Duration

	mu      sync.Mutex
	raw     bytes.Buffer  // everything written, in order
	answers []string      // still to type
	asking  chan struct{} // closed when a question waits for its answer
	typed   sync.WaitGroup
	stdin   *io.PipeWriter
}

func newVT(tty bool, answers ...string) (*vt, io.Reader) {
	pr, pw := io.Pipe()
	return &vt{tty: tty, think: 100 * time.Millisecond, lag: 300 * time.Millisecond,
		answers: answers, asking: make(chan struct{}), stdin: pw}, pr
}

// stdout and stderr are the process's two outputs, drawn on the screen.
func (v *vt) stdout() io.Writer { return vtOut{v} }
func (v *vt) stderr() io.Writer { return vtErr{v} }

type vtOut struct{ v *vt }

func (o vtOut) Write(p []byte) (int, error) {
	if subAgentCallLine.Match(ansi.ReplaceAll(p, nil)) {
		o.v.mu.Lock()
		asking := o.v.asking
		o.v.mu.Unlock()
		select {
		case <-asking:
		case <-time.After(o.v.lag):
		}
	}
	return o.v.write(p)
}

// terminal makes isTerminal report a terminal, as for os.Stdout on one.
func (o vtOut) terminal() bool { return o.v.tty }

// subAgentCallLine matches the line that shows a sub-agent's tool call.
var subAgentCallLine = regexp.MustCompile(`│ ⏺ \S+ \{`)

type vtErr struct{ v *vt }

func (e vtErr) Write(p []byte) (int, error) { return e.v.write(p) }

func (v *vt) write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.raw.Write(p)
	if bytes.HasSuffix(p, []byte(question)) && len(v.answers) > 0 {
		answer := v.answers[0]
		v.answers = v.answers[1:]
		close(v.asking)
		v.typed.Add(1)
		time.AfterFunc(v.think, func() {
			defer v.typed.Done()
			v.mu.Lock()
			v.raw.WriteString(answer + "\n") // the echo
			v.asking = make(chan struct{})
			v.mu.Unlock()
			v.stdin.Write([]byte(answer + "\n")) //nolint:errcheck // closed at the end: the answer was not needed
		})
	}
	return len(p), nil
}

// close ends stdin once the person typed every answer due.
func (v *vt) close() {
	v.typed.Wait()
	v.stdin.Close()
}

// lines returns the screen's lines as the person sees them: a carriage
// return goes back to the start of the line, ESC [ K erases to its end, and
// the colours are not text.
func (v *vt) lines() []string {
	v.mu.Lock()
	s := v.raw.String()
	v.mu.Unlock()
	lines := [][]rune{nil}
	row, col := 0, 0
	for i := 0; i < len(s); {
		if m := ansi.FindStringIndex(s[i:]); m != nil && m[0] == 0 {
			if s[i+m[1]-1] == 'K' {
				lines[row] = lines[row][:min(col, len(lines[row]))]
			}
			i += m[1]
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '\r':
			col = 0
		case '\n':
			row, col = row+1, 0
			if row == len(lines) {
				lines = append(lines, nil)
			}
		default:
			for len(lines[row]) < col {
				lines[row] = append(lines[row], ' ')
			}
			if col < len(lines[row]) {
				lines[row][col] = r
			} else {
				lines[row] = append(lines[row], r)
			}
			col++
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return out
}

// A sub-agent's approval question is asked by the sub-agent's goroutine
// while the host's goroutine draws the transcript: the question must come
// after the call it asks about, each of its lines intact, and nothing may be
// drawn into it before it is answered.
func TestSubAgentQuestionOnItsOwnLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		args []string
	}{
		{"stdout is the terminal", true, nil},
		{"stdout and stderr piped together", false, nil},
		// The researcher's two calls are asked about at the same time.
		{"parallel calls", true, []string{"-parallel"}},
		// The lines of -log are written by the run that made the call, the
		// researcher's by its own goroutine, between the chunks.
		{"with -log", true, []string{"-log"}},
		{"with -log, parallel calls", true, []string{"-log", "-parallel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			noModelEnv(t)
			v, stdin := newVT(tc.tty, "y", "y")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			code := run(ctx, append(tc.args, researchPrompt), stdin, v.stdout(), v.stderr())
			v.close()
			screen := v.lines()
			all := strings.Join(screen, "\n")
			require.Equal(t, 0, code, "screen:\n%s", all)
			for _, c := range []struct{ tool, args, indented string }{
				{"get_weather", `{"city":"Oslo"}`, `    "city": "Oslo"`},
				{"get_time", `{"timezone":"Asia/Tokyo"}`, `    "timezone": "Asia/Tokyo"`},
			} {
				call := indexOf(screen, "  researcher │ ⏺ "+c.tool+" "+c.args)
				ask := indexOf(screen, "Tool call "+c.tool+" wants to run with:")
				require.True(t, call >= 0 && ask > call, "the call's line, then its question:\n%s", all)
				assert.Equal(t, []string{"  {", c.indented, "  }", question + "y"}, screen[ask+1:min(ask+5, len(screen))],
					"the question's lines, intact, the answer typed after it:\n%s", all)
			}
			assert.Equal(t, 2, strings.Count(all, question), "screen:\n%s", all)
			logged := 0
			for _, l := range screen {
				if strings.Contains(l, "api #") {
					logged++
					assert.Regexp(t, summaryRE, l, "a -log line of its own:\n%s", all)
				}
			}
			if slices.Contains(tc.args, "-log") {
				assert.Equal(t, 5, logged, "a line per model call (the researcher's two included):\n%s", all)
			}
		})
	}
}

// indexOf returns the index of the first line that is s, or -1.
func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

// A log record of -v (written by any goroutine) starts on a line of its own
// and waits while a question is on screen.
func TestLogRecordWaitsForTheQuestion(t *testing.T) {
	var screenBuf signalWriter
	r := newHumanRenderer(&screenBuf, false, false)
	s := newScreen(r.newline)
	logw := &logWriter{w: &screenBuf, screen: s}
	s.draw(agent.Chunk{Kind: agent.KindText, Text: "Let me look"}, r.chunk)

	asked, answer := make(chan struct{}), make(chan struct{})
	go s.own(func() {
		io.WriteString(&screenBuf, "\n"+question) //nolint:errcheck // a buffer
		close(asked)
		<-answer
		io.WriteString(&screenBuf, "y\n") //nolint:errcheck // the echo
	})
	<-asked
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		logw.Write([]byte("level=DEBUG msg=\"model call\"\n")) //nolint:errcheck // a buffer
	}()
	select {
	case <-logged:
		t.Fatalf("the record was written while the question waited:\n%s", screenBuf.String())
	case <-time.After(100 * time.Millisecond):
	}
	close(answer)
	<-logged
	s.draw(agent.Chunk{Kind: agent.KindText, Text: "Done."}, r.chunk)
	s.own(r.endTurn)
	assert.Equal(t, "Let me look\n\n"+question+"y\nlevel=DEBUG msg=\"model call\"\nDone.\n", screenBuf.String())
}
