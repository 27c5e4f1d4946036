package cdp_test

import (
	"bytes"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planround/planround/internal/cdp"
)

const form = `<!doctype html>
<title>form</title>
<input id="name">
<button id="go" onclick="document.querySelector('#out').textContent = 'hello ' + document.querySelector('#name').value">go</button>
<input id="file" type="file" onchange="document.querySelector('#out').textContent = this.files[0].name">
<p id="out"></p>
<script>console.error('said', 2)</script>
`

// TestPage drives one page as a user would and reads it back.
func TestPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(form))
	}))
	t.Cleanup(srv.Close)
	b := cdp.Start(t)
	p := b.NewPage(800, 600)
	p.AddInitScript(`window.early = document.scripts.length === 0`)
	p.Navigate(srv.URL + "/")

	if got := p.Str(`document.title`); got != "form" {
		t.Errorf("title = %q, want %q", got, "form")
	}
	if got := p.Int(`document.querySelectorAll('input').length`); got != 2 {
		t.Errorf("inputs = %d, want 2", got)
	}
	var early bool
	if err := p.Eval(`window.early`, &early); err != nil || !early {
		t.Errorf("the init script ran before the page's scripts: %v, %v", early, err)
	}

	p.TypeText("#name", `Ada "L"`)
	p.Click("#go")
	p.WaitFor("the greeting", `document.querySelector('#out').textContent === `+cdp.JSString(`hello Ada "L"`))

	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.SetFiles("#file", file)
	p.WaitFor("the file's name", `document.querySelector('#out').textContent === 'notes.txt'`)

	p.EmulateColorScheme("dark")
	if got := p.Str(`matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'`); got != "dark" {
		t.Errorf("color scheme = %q, want dark", got)
	}

	if err := p.Eval(`(() => { throw new Error('boom') })()`, nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Eval of a throw: err = %v, want the exception", err)
	}
	p.JS(`setTimeout(() => { throw new Error('late') })`)

	shot := filepath.Join(t.TempDir(), "page.png")
	p.Screenshot(shot)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if got := img.Bounds().Size(); got.X != 800 || got.Y != 600 {
		t.Errorf("screenshot size = %v, want 800×600", got)
	}

	// The page's own console.error and the uncaught exception are kept.
	errs := b.PageErrors()
	if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, "console.error: said") }) {
		t.Errorf("PageErrors = %q, want the console.error", errs)
	}
	uncaught := func(e string) bool { return strings.HasPrefix(e, "exception: ") && strings.Contains(e, "late") }
	for deadline := time.Now().Add(5 * time.Second); !slices.ContainsFunc(errs, uncaught); errs = b.PageErrors() {
		if time.Now().After(deadline) {
			t.Fatalf("PageErrors = %q, want the uncaught exception", errs)
		}
		time.Sleep(10 * time.Millisecond)
	}

	b.Close()
	b.Close() // and again when the test ends
}

// TestJSString: each literal, evaluated in a page, is the string again.
func TestJSString(t *testing.T) {
	p := cdp.Start(t).NewPage(100, 100)
	for _, s := range []string{"", "a", `it's "quoted"`, "line\nbreak\u2028", "</script>", "\\ é 😀"} {
		if got := p.Str(cdp.JSString(s)); got != s {
			t.Errorf("JSString(%q) evaluates to %q", s, got)
		}
	}
}

// TestLogErrors: what the browser logs itself is kept apart from the
// page's own errors: a request answered 404 (a missing favicon), and a
// Content-Security-Policy violation of a new Function the script caught.
// A clean page has none.
func TestLogErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		switch r.URL.Path {
		case "/clean":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(`<!doctype html><title>clean</title><link rel="icon" href="/icon.svg"><p>ok</p>`))
		case "/icon.svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			w.Write([]byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>`))
		case "/broken":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(`<!doctype html><title>broken</title><link rel="icon" href="/missing.ico"><script src="/eval.js"></script>`))
		case "/eval.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(`try { new Function(''); } catch (e) { window.caught = true; }`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	b := cdp.Start(t)
	p := b.NewPage(400, 300)
	p.Navigate(srv.URL + "/clean")
	time.Sleep(200 * time.Millisecond)
	if errs := b.Errors(); len(errs) > 0 {
		t.Fatalf("a clean page: Errors = %q", errs)
	}

	p.Navigate(srv.URL + "/broken")
	p.WaitFor("the script", `window.caught === true`)
	has := func(errs []string, source, text string) bool {
		return slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, source+": ") && strings.Contains(e, text) })
	}
	var errs []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		errs = b.LogErrors()
		if has(errs, "network", "404") && has(errs, "security", "eval.js") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LogErrors = %q, want the 404 and the CSP violation", errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pe := b.PageErrors(); len(pe) > 0 {
		t.Errorf("PageErrors = %q: the browser's own log is not the page's errors", pe)
	}
	if got := b.Errors(); len(got) != len(errs) {
		t.Errorf("Errors = %q, want LogErrors %q", got, errs)
	}
}
