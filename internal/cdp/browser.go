package cdp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ChromiumPath returns the path of Chromium (or Chrome), or skips t when
// there is none: it fails t instead when PLANROUND_REQUIRE_ALL=1, as in CI.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	candidates := []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
		t.Fatal("chromium not found (PLANROUND_REQUIRE_ALL=1): apt-get install chromium")
	}
	t.Skip("chromium not found: apt-get install chromium")
	return ""
}

// message is one message of the protocol, in either direction: a command
// (ID and Method), its answer (ID, and Result or Error) or an event
// (Method, no ID). SessionID names the page a command is for or an event
// comes from.
type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Browser is a headless Chromium driven over the DevTools pipe, for one
// test. Its methods and its pages' are safe for concurrent use, but those
// that may fail the test must be called from the test's goroutine, as
// t.Fatal must.
type Browser struct {
	t    testing.TB
	cmd  *exec.Cmd
	in   *os.File // our end of Chromium's fd 3
	out  *os.File // our end of Chromium's fd 4
	done chan struct{}

	closeOnce sync.Once

	wmu sync.Mutex // serialises writes to in

	mu      sync.Mutex // guards the fields below
	nextID  int
	waiting map[int]chan message
	errors  []string // JavaScript exceptions and console errors of the pages
	logged  []string // the pages' log entries of level error
	closed  bool
}

// Start starts Chromium for t, with a profile in a directory of its own and
// its output in chromium.log there, or skips t as [ChromiumPath] does. When
// t ends, Chromium and its children (its whole process group) are killed.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := ChromiumPath(t)
	dir := t.TempDir()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(path,
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fd 3, fd 4
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	cmdR.Close()
	outW.Close()
	b := &Browser{t: t, cmd: cmd, in: cmdW, out: outR, done: make(chan struct{}), waiting: map[int]chan message{}}
	go b.read()
	t.Cleanup(b.Close)
	return b
}

// read hands each answer to the call waiting for it and records events,
// until Chromium closes its end of the pipe; then it fails the calls still
// waiting.
func (b *Browser) read() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.out, 1<<20)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.waiting[m.ID]; ch != nil {
				delete(b.waiting, m.ID)
				ch <- m
			}
		} else {
			b.event(m)
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.closed = true
	for id, ch := range b.waiting {
		delete(b.waiting, id)
		close(ch)
	}
	b.mu.Unlock()
}

// event records the pages' errors. b.mu is held.
func (b *Browser) event(m message) {
	switch m.Method {
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(m.Params, &p)
		b.errors = append(b.errors, "exception: "+p.ExceptionDetails.Text+" "+p.ExceptionDetails.Exception.Description)
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(m.Params, &p)
		if p.Type == "error" {
			var parts []string
			for _, a := range p.Args {
				parts = append(parts, fmt.Sprint(a.Value, a.Description))
			}
			b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
		}
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		json.Unmarshal(m.Params, &p)
		if e := p.Entry; e.Level == "error" {
			line := e.Source + ": " + e.Text
			if e.URL != "" {
				line += " (" + e.URL + ")"
			}
			b.logged = append(b.logged, line)
		}
	}
}

// PageErrors returns the JavaScript exceptions and console errors of the
// browser's pages seen so far, each as one line ("exception: …" or
// "console.error: …"), oldest first.
func (b *Browser) PageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// LogErrors returns what the browser itself logged as errors on its pages
// so far, which [Browser.PageErrors] does not see: a request that failed
// or was answered with an error status (a missing favicon's 404), a
// Content-Security-Policy violation (a script's new Function or eval, even
// one it caught), a deprecation turned error. Each is one line, "source:
// text (url)" with the Log domain's source ("network", "security",
// "javascript", ...), oldest first.
func (b *Browser) LogErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.logged...)
}

// Errors returns [Browser.PageErrors] and [Browser.LogErrors] together:
// what a page that works cleanly has none of.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(append([]string(nil), b.errors...), b.logged...)
}

// call sends one command (to the page of session, or to the browser when
// session is "") and waits up to 30 s for its answer.
func (b *Browser) call(session, method string, params any) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("cdp: browser gone")
	}
	b.nextID++
	id := b.nextID
	b.waiting[id] = ch
	b.mu.Unlock()

	msg, err := json.Marshal(message{ID: id, Method: method, Params: raw, SessionID: session})
	if err != nil {
		return nil, err
	}
	b.wmu.Lock()
	_, err = b.in.Write(append(msg, 0))
	b.wmu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cdp: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("cdp: %s: browser gone", method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("cdp: %s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		return m.Result, nil
	case <-time.After(30 * time.Second):
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return nil, fmt.Errorf("cdp: %s: no answer", method)
	}
}

// Close ends Chromium and its children and waits until the pipe is read to
// its end. [Start] makes it a cleanup of the test; a test may call it
// earlier, and calls after the first do nothing.
func (b *Browser) Close() {
	b.closeOnce.Do(b.close)
}

func (b *Browser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		b.call("", "Browser.close", struct{}{}) //nolint:errcheck // killed below anyway
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) // the whole group: renderers, zygotes
	b.cmd.Wait()
	b.in.Close()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		b.out.Close() // a straggler holds fd 4: unblock the reader
		<-b.done
	}
	b.out.Close()
	<-closed
}

// AllowDownloads saves the browser's downloads into dir.
func (b *Browser) AllowDownloads(dir string) {
	b.t.Helper()
	if _, err := b.call("", "Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": dir}); err != nil {
		b.t.Fatal(err)
	}
}
