package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// heldImport is a POST /api/sessions/import whose body is still arriving:
// the server counts it in flight until its body ends.
type heldImport struct {
	conn net.Conn
	size int
	sent int
}

// holdImport starts an import of client's browser that declares a body of
// size bytes and sends only its first byte, and waits until the server
// counts it.
func (h *harness) holdImport(t *testing.T, client *http.Client, size int) *heldImport {
	t.Helper()
	before := h.importsInFlight()
	hi := startImport(t, client, h.ts.URL, size)
	require.Eventually(t, func() bool { return h.importsInFlight().n == before.n+1 }, waitLimit, 5*time.Millisecond, "the server counts the import")
	return hi
}

// startImport starts an import at base of client's browser that declares a
// body of size bytes and sends only its first byte.
func startImport(t *testing.T, client *http.Client, base string, size int) *heldImport {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	var cookie string
	for _, c := range client.Jar.Cookies(u) {
		if c.Name == ownerCookie {
			cookie = c.Value
		}
	}
	require.NotEmpty(t, cookie, "the browser has no owner cookie")
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() }) // before the server closes: it waits for the handler
	require.NoError(t, conn.SetDeadline(time.Now().Add(waitLimit)))
	_, err = fmt.Fprintf(conn, "POST /api/sessions/import HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nCookie: %s=%s\r\nContent-Length: %d\r\n\r\n{", ownerCookie, cookie, size)
	require.NoError(t, err)
	return &heldImport{conn: conn, size: size, sent: 1}
}

// finish sends the rest of the body: white space, which makes the
// document "{" followed by nothing, so the import fails (400).
func (hi *heldImport) finish(t *testing.T) {
	t.Helper()
	_, err := hi.conn.Write(bytes.Repeat([]byte(" "), hi.size-hi.sent))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(hi.conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a document cut short")
	hi.conn.Close()
}

// importsInFlight returns what the server counts of the imports in flight.
func (h *harness) importsInFlight() importLoad {
	h.srv.mu.Lock()
	defer h.srv.mu.Unlock()
	return h.srv.imports
}

// padded returns doc followed by white space up to size bytes.
func padded(t *testing.T, doc []byte, size int) []byte {
	t.Helper()
	require.LessOrEqual(t, len(doc), size)
	return append(bytes.Clone(doc), bytes.Repeat([]byte("\n"), size-len(doc))...)
}

// TestImportLimits: the imports in flight are bounded per browser (429) and
// in the whole server (503), in number and in the bytes of their bodies;
// an import frees its share when it ends, whether it succeeded, failed or
// its client went away.
func TestImportLimits(t *testing.T) {
	leaktest.Check(t)
	const kib = 1 << 10
	h := newHarness(t, Options{
		MaxImportSize: 64 * kib,
		MaxImports:    3, MaxImportsPerOwner: 2,
		MaxImportBytes: 160 * kib, MaxImportBytesPerOwner: 96 * kib,
		BodyTimeout: waitLimit,
	})
	s := h.newSession(t)
	h.converse(t, s, "Hello!")
	doc, err := memory.Export(t.Context(), h.srv.store, s)
	require.NoError(t, err)
	a, b, c := h.client, h.newBrowser(t), h.newBrowser(t)
	imp := func(client *http.Client, size int) (int, map[string]any) {
		t.Helper()
		return importAs(t, client, h.ts.URL, padded(t, doc, size))
	}

	// Two imports of a in flight: a third is refused, b's goes on.
	a1 := h.holdImport(t, a, 40*kib)
	a2 := h.holdImport(t, a, 40*kib)
	status, out := imp(a, len(doc))
	assert.Equal(t, http.StatusTooManyRequests, status, "a third import of one browser: %v", out)
	assert.Contains(t, out["error"], "2 imports in flight")
	status, out = imp(b, len(doc))
	require.Equal(t, http.StatusOK, status, "another browser: %v", out)

	// Three in flight: the server is full.
	b1 := h.holdImport(t, b, 64*kib)
	status, out = imp(c, len(doc))
	assert.Equal(t, http.StatusServiceUnavailable, status, "a fourth import in a server of three: %v", out)
	assert.Contains(t, out["error"], "3 imports in flight")
	assert.Equal(t, importLoad{3, 144 * kib}, h.importsInFlight())

	// a1 fails (its document is cut short): its share is free again.
	a1.finish(t)
	assert.Equal(t, importLoad{2, 104 * kib}, h.importsInFlight())
	status, out = imp(c, len(doc))
	require.Equal(t, http.StatusOK, status, "%v", out)

	// Bytes: a holds 40 KiB of its 96; 60 more would be 100.
	status, out = imp(a, 60*kib)
	assert.Equal(t, http.StatusTooManyRequests, status, "%v", out)
	assert.Contains(t, out["error"], "beyond 98304")
	status, out = imp(a, 56*kib)
	require.Equal(t, http.StatusOK, status, "%v", out)
	// The server holds 104 KiB of its 160; 60 more would be 164.
	status, out = imp(c, 60*kib)
	assert.Equal(t, http.StatusServiceUnavailable, status, "%v", out)
	assert.Contains(t, out["error"], "at most 163840")
	status, out = imp(c, 56*kib)
	require.Equal(t, http.StatusOK, status, "%v", out)

	// b1's client goes away: its share is free again.
	b1.conn.Close()
	require.Eventually(t, func() bool { return h.importsInFlight() == importLoad{1, 40 * kib} }, waitLimit, 5*time.Millisecond)
	a2.finish(t)
	assert.Equal(t, importLoad{}, h.importsInFlight())
	h.srv.mu.Lock()
	assert.Empty(t, h.srv.ownerImports)
	h.srv.mu.Unlock()

	// Refused imports (too large, not an export) count nothing after
	// their answer either.
	status, _ = imp(a, 65*kib)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	status, _ = importAs(t, a, h.ts.URL, []byte(`{"format": "planround.session/v9"}`))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, importLoad{}, h.importsInFlight())
	assert.Len(t, listSessions(t, a, h.ts.URL), 2, "the session and a's import")
	assert.Len(t, listSessions(t, b, h.ts.URL), 1)
	assert.Len(t, listSessions(t, c, h.ts.URL), 2)
}

// TestImportLimitOptions: a byte limit below the largest import would
// refuse it forever: NewServer says so.
func TestImportLimitOptions(t *testing.T) {
	for _, o := range []Options{
		{MaxImportSize: 1 << 20, MaxImportBytes: 1<<20 - 1},
		{MaxImportBytesPerOwner: DefaultMaxImportSize - 1},
		{MaxImports: -1},
	} {
		o.Model, o.BaseURL = "m", "http://127.0.0.1:1/v1"
		srv, err := NewServer(o)
		if !assert.Error(t, err, "%+v", o) {
			srv.Close()
		}
	}
	srv, err := NewServer(Options{Model: "m", BaseURL: "http://127.0.0.1:1/v1", MaxImportSize: 1 << 30})
	require.NoError(t, err, "the byte limits default to at least MaxImportSize")
	defer srv.Close()
	assert.Equal(t, importLoad{DefaultMaxImports, 1 << 30}, srv.maxImports)
	assert.Equal(t, importLoad{DefaultMaxImportsPerOwner, 1 << 30}, srv.maxImportsPerOwner)
}

// TestImportFlags checks that -max-imports and -max-import-bytes reach the
// server: with -max-imports 1, an import held in flight makes a second one
// 503.
func TestImportFlags(t *testing.T) {
	var stdout, stderr strings.Builder
	assert.Equal(t, 2, run(t.Context(), []string{"-max-imports", "0"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-max-imports must be positive")
	assert.Equal(t, 2, run(t.Context(), []string{"-max-import-bytes", "1000"}, &stdout, &stderr, nil))
	assert.Contains(t, stderr.String(), "-max-import-bytes must be at least 33554432")

	leaktest.Check(t)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "WEBCHAT_TOKEN"} {
		t.Setenv(k, "")
	}
	p := startProgram(t, "-max-imports", "1", "-max-import-bytes", "40000000")
	base := strings.TrimSuffix(p.URL, "/")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}, Jar: jar}
	defer client.CloseIdleConnections()
	st, _ := getAs(t, client, p.URL) // the owner cookie
	require.Equal(t, http.StatusOK, st)
	held := startImport(t, client, base, 1000)
	// Until the server counts the held import, {} is refused as no export.
	require.Eventually(t, func() bool {
		status, _ := importAs(t, client, base, []byte(`{}`))
		return status == http.StatusServiceUnavailable
	}, waitLimit, 10*time.Millisecond, "a second import beyond -max-imports 1 is refused with 503")
	held.conn.Close()
	p.cancel()
	assert.Equal(t, 0, p.wait(t), "stderr: %s", p.stderr.String())
}

// TestImportAllocations: an import allocates about the size of its
// document, decoded, besides what the Store keeps: it no longer reads the
// body whole and then decodes a copy of it. The document here is 4 MiB of
// messages of 2 KiB; the figure counts every byte the import allocates
// (runtime.MemStats.TotalAlloc), so it bounds what it can hold.
func TestImportAllocations(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	doc := bigExport(t, 2048, 2048)
	a := h.importAllocs(t, doc)
	perByte := float64(a) / float64(len(doc))
	t.Logf("%d bytes allocated for a document of %d bytes: %.2f per byte", a, len(doc), perByte)
	assert.Less(t, perByte, 3.0, "bytes allocated per byte of the document (8.8 when the body was read whole)")
}

// bigExport returns an export of n user messages of size bytes of text
// each.
func bigExport(t testing.TB, n, size int) []byte {
	t.Helper()
	ctx := t.Context()
	st := new(memory.MemStore)
	_, err := st.CreateSession(ctx, memory.Session{ID: "big", Title: "Big"})
	require.NoError(t, err)
	msgs := make([]memory.Message, n)
	for i := range msgs {
		msgs[i] = memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("%d %s", i, strings.Repeat("x", size))}
	}
	_, err = st.Append(ctx, "big", msgs...)
	require.NoError(t, err)
	doc, err := memory.Export(ctx, st, "big")
	require.NoError(t, err)
	return doc
}

// importAllocs posts doc to the import handler, in this goroutine, and
// returns the bytes allocated meanwhile.
func (h *harness) importAllocs(t testing.TB, doc []byte) uint64 {
	t.Helper()
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	cookies := h.client.Jar.Cookies(u)
	req := httptest.NewRequest(http.MethodPost, "/api/sessions/import", bytes.NewReader(doc))
	req.Host = "127.0.0.1"
	req.Header.Set("Content-Type", "application/json")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.srv.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return after.TotalAlloc - before.TotalAlloc
}
