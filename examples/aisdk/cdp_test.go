package main

import (
	"bufio"
	"context"
	"encoding/base64"
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

// A small Chrome DevTools Protocol client over --remote-debugging-pipe,
// copied from examples/webchat/cdp_test.go (what this package's test
// needs): Chromium reads commands from fd 3 and writes answers and events
// to fd 4, each a JSON message ended by a NUL byte. The pipe is the
// debugging channel: no port, so no other process on 127.0.0.1 can drive
// the browser. No dependency beyond os/exec.

// chromiumPath finds Chromium, or skips the test (fails it when
// PLANROUND_REQUIRE_ALL=1, as in CI).
func chromiumPath(t *testing.T) string {
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

type cdpMessage struct {
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

// browser is a headless Chromium driven over the DevTools pipe.
type browser struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   *os.File // our end of Chromium's fd 3
	out  *os.File // our end of Chromium's fd 4
	done chan struct{}

	wmu sync.Mutex // serialises writes to in

	mu      sync.Mutex // guards the fields below
	nextID  int
	waiting map[int]chan cdpMessage
	errors  []string // JavaScript exceptions and console errors of the page
	closed  bool
}

// startBrowser starts Chromium; it is killed (its whole process group) when
// the test ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
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
	b := &browser{t: t, cmd: cmd, in: cmdW, out: outR, done: make(chan struct{}), waiting: map[int]chan cdpMessage{}}
	go b.read()
	t.Cleanup(b.close)
	return b
}

func (b *browser) read() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.out, 1<<20)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			break
		}
		var m cdpMessage
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

// event records the page's errors. b.mu is held.
func (b *browser) event(m cdpMessage) {
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
	}
}

// pageErrors returns the JavaScript errors seen so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// call sends one command and waits for its answer.
func (b *browser) call(session, method string, params any) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan cdpMessage, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("cdp: browser gone")
	}
	b.nextID++
	id := b.nextID
	b.waiting[id] = ch
	b.mu.Unlock()

	msg, err := json.Marshal(cdpMessage{ID: id, Method: method, Params: raw, SessionID: session})
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

// close ends Chromium and its children and waits for the reader.
func (b *browser) close() {
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

// page is one tab, attached with a flat session.
type page struct {
	b       *browser
	session string
}

// newPage opens a tab of w×h CSS pixels.
func (b *browser) newPage(w, h int) *page {
	b.t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		b.t.Fatal(err)
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	json.Unmarshal(res, &target)
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		b.t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &att)
	p := &page{b: b, session: att.SessionID}
	p.must("Page.enable", struct{}{})
	p.must("Runtime.enable", struct{}{})
	p.must("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false})
	return p
}

func (p *page) must(method string, params any) json.RawMessage {
	p.b.t.Helper()
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		p.b.t.Fatal(err)
	}
	return res
}

// eval evaluates expr in the page (awaiting a promise) and decodes its value
// into v (when v is not nil).
func (p *page) eval(expr string, v any) error {
	res, err := p.b.call(p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true,
	})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if v == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, v)
}

// js evaluates expr and fails the test on an error.
func (p *page) js(expr string) {
	p.b.t.Helper()
	if err := p.eval(expr, nil); err != nil {
		p.b.t.Fatal(err)
	}
}

// str evaluates expr to a string.
func (p *page) str(expr string) string {
	p.b.t.Helper()
	var s string
	if err := p.eval(expr, &s); err != nil {
		p.b.t.Fatal(err)
	}
	return s
}

// waitFor polls expr until it is true, for up to 20 s; on a timeout it
// fails with what the page shows.
func (p *page) waitFor(what, expr string) {
	p.b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		err := p.eval("!!("+expr+")", &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			p.eval("document.body.innerText", &text) //nolint:errcheck // best effort
			p.b.t.Fatalf("waiting for %s: %s (last error: %v)\npage text:\n%s\npage errors: %v", what, expr, err, text, p.b.pageErrors())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (p *page) navigate(url string) {
	p.b.t.Helper()
	p.must("Page.navigate", map[string]any{"url": url})
	p.waitFor("the page to load", "document.readyState === 'complete' && location.href === "+jsString(url))
}

// typeText focuses the element and types text as keyboard input.
func (p *page) typeText(selector, text string) {
	p.b.t.Helper()
	p.js("document.querySelector(" + jsString(selector) + ").focus()")
	p.must("Input.insertText", map[string]any{"text": text})
}

// click clicks the element with a real mouse event at its centre.
func (p *page) click(selector string) {
	p.b.t.Helper()
	p.clickJS("document.querySelector(" + jsString(selector) + ")")
}

// clickJS clicks the element the JavaScript expression elem returns.
func (p *page) clickJS(elem string) {
	p.b.t.Helper()
	var box struct{ X, Y float64 }
	err := p.eval(`(() => { const e = `+elem+`;
		if (!e) throw new Error('no element: ' + `+jsString(elem)+`);
		e.scrollIntoView({block: 'center'});
		const r = e.getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, &box)
	if err != nil {
		p.b.t.Fatal(err)
	}
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		p.must("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": box.X, "y": box.Y, "button": "left", "clickCount": 1})
	}
}

// screenshot writes a PNG of the viewport to path.
func (p *page) screenshot(path string) {
	p.b.t.Helper()
	res := p.must("Page.captureScreenshot", map[string]any{"format": "png"})
	var shot struct {
		Data string `json:"data"`
	}
	json.Unmarshal(res, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.b.t.Fatal(err)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
