package cdp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// Page is one tab of a [Browser], attached with a flat session. Its methods
// fail the browser's test on an error, except Eval, which returns it.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab of w×h CSS pixels, showing about:blank, with the
// Page, Runtime and Log domains enabled (so that its errors reach
// [Browser.PageErrors] and [Browser.LogErrors]).
func (b *Browser) NewPage(w, h int) *Page {
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
	p := &Page{b: b, session: att.SessionID}
	p.Must("Page.enable", struct{}{})
	p.Must("Runtime.enable", struct{}{})
	p.Must("Log.enable", struct{}{})
	p.Must("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false})
	return p
}

// T returns the test the page's browser was started for, for helpers
// built on Page to mark themselves (T().Helper()) and fail it.
func (p *Page) T() testing.TB {
	return p.b.t
}

// Must sends the page the DevTools command method with params (a value
// that encodes to a JSON object) and returns the command's result.
func (p *Page) Must(method string, params any) json.RawMessage {
	p.b.t.Helper()
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		p.b.t.Fatal(err)
	}
	return res
}

// Eval evaluates the JavaScript expression expr in the page, awaiting it
// when it is a promise, and decodes its value into v unless v is nil. A
// JavaScript exception is returned as an error.
func (p *Page) Eval(expr string, v any) error {
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

// JS evaluates expr as [Page.Eval] does, for its effect.
func (p *Page) JS(expr string) {
	p.b.t.Helper()
	if err := p.Eval(expr, nil); err != nil {
		p.b.t.Fatal(err)
	}
}

// Str evaluates expr, a string.
func (p *Page) Str(expr string) string {
	p.b.t.Helper()
	var s string
	if err := p.Eval(expr, &s); err != nil {
		p.b.t.Fatal(err)
	}
	return s
}

// Int evaluates expr, a number.
func (p *Page) Int(expr string) int {
	p.b.t.Helper()
	var n int
	if err := p.Eval(expr, &n); err != nil {
		p.b.t.Fatal(err)
	}
	return n
}

// WaitFor evaluates expr every 25 ms until it is truthy, for up to 20 s.
// On a timeout it fails the test saying what it waited for (what), the
// last error, the page's text and [Browser.Errors].
func (p *Page) WaitFor(what, expr string) {
	p.b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		err := p.Eval("!!("+expr+")", &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			p.Eval("document.body.innerText", &text) //nolint:errcheck // best effort
			p.b.t.Fatalf("waiting for %s: %s (last error: %v)\npage text:\n%s\npage errors: %v", what, expr, err, text, p.b.Errors())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Navigate loads url and waits until the page shows it, loaded.
func (p *Page) Navigate(url string) {
	p.b.t.Helper()
	p.Must("Page.navigate", map[string]any{"url": url})
	p.WaitFor("the page to load", "document.readyState === 'complete' && location.href === "+JSString(url))
}

// TypeText focuses the element selector names and types text into it as
// keyboard input.
func (p *Page) TypeText(selector, text string) {
	p.b.t.Helper()
	p.JS("document.querySelector(" + JSString(selector) + ").focus()")
	p.Must("Input.insertText", map[string]any{"text": text})
}

// Click clicks the element selector names as [Page.ClickJS] does.
func (p *Page) Click(selector string) {
	p.b.t.Helper()
	p.ClickJS("document.querySelector(" + JSString(selector) + ")")
}

// ClickJS clicks the element the JavaScript expression elem returns, with
// a real mouse press and release at its centre, once it is scrolled into
// view.
func (p *Page) ClickJS(elem string) {
	p.b.t.Helper()
	var box struct{ X, Y float64 }
	err := p.Eval(`(() => { const e = `+elem+`;
		if (!e) throw new Error('no element: ' + `+JSString(elem)+`);
		e.scrollIntoView({block: 'center'});
		const r = e.getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, &box)
	if err != nil {
		p.b.t.Fatal(err)
	}
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		p.Must("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": box.X, "y": box.Y, "button": "left", "clickCount": 1})
	}
}

// Screenshot writes a PNG of the viewport to path.
func (p *Page) Screenshot(path string) {
	p.b.t.Helper()
	res := p.Must("Page.captureScreenshot", map[string]any{"format": "png"})
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

// EmulateColorScheme makes the page's prefers-color-scheme media feature
// say scheme ("light" or "dark"), as a system setting would.
func (p *Page) EmulateColorScheme(scheme string) {
	p.b.t.Helper()
	p.Must("Emulation.setEmulatedMedia", map[string]any{
		"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}},
	})
}

// AddInitScript runs source in every document the page loads from now on,
// before the document's own scripts.
func (p *Page) AddInitScript(source string) {
	p.b.t.Helper()
	p.Must("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": source})
}

// SetFiles chooses files (paths on this machine) in the file input
// selector names, as a user picking them would: its input and change
// events fire.
func (p *Page) SetFiles(selector string, files ...string) {
	p.b.t.Helper()
	res := p.Must("Runtime.evaluate", map[string]any{"expression": "document.querySelector(" + JSString(selector) + ")"})
	var r struct {
		Result struct {
			ObjectID string `json:"objectId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Result.ObjectID == "" {
		p.b.t.Fatalf("no element %s (%v)", selector, err)
	}
	p.Must("DOM.setFileInputFiles", map[string]any{"files": files, "objectId": r.Result.ObjectID})
}

// JSString returns s as a JavaScript string literal, for building
// expressions: "document.querySelector(" + JSString(sel) + ")".
func JSString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
