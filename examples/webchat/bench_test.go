package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planround/planround/demo"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// benchServer starts a Server on the demo model (no delay) with store
// (nil: in memory) and returns its address and a browser client.
func benchServer(b *testing.B, store memory.Store) (string, *http.Client) {
	b.Helper()
	srv, err := NewServer(Options{
		BaseURL: demo.BaseURL, HTTPClient: demo.Model{}.Client(), Model: demo.ModelName,
		Tools: demo.Tools(), Store: store, MaxRunsPerOwner: 1000, MaxRuns: 1000,
	})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(func() { srv.Close(); ts.Close() })
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	b.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get(ts.URL + "/")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return ts.URL, c
}

// benchTurns runs b.N turns that need no tool ("Hello!"), each in a new
// session (a session's history grows with its turns) watched by an event
// stream until its run_done: what a turn costs the server, the demo model
// (in process, no delay) and the store included.
func benchTurns(b *testing.B, store memory.Store) {
	base, c := benchServer(b, store)
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Post(base+"/api/sessions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		var out apiResponse
		jsonDecode(resp, &out) //nolint:errcheck // checked below
		resp.Body.Close()
		if out.SessionID == "" {
			b.Fatal("no session")
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/api/events?session_id="+out.SessionID, nil)
		stream, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		lines := bufio.NewScanner(stream.Body)
		lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
		r, err := c.Post(base+"/api/chat", "application/json", strings.NewReader(`{"session_id":"`+out.SessionID+`","message":"Hello!"}`))
		if err != nil {
			b.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			b.Fatalf("chat: %s", r.Status)
		}
		for lines.Scan() {
			l := lines.Text()
			if strings.HasPrefix(l, "data: ") {
				events++
			}
			if l == "event: run_done" {
				break
			}
		}
		stream.Body.Close()
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/turn")
}

// BenchmarkTurn: a whole turn through the server, on each store: memory
// (the turn log in memory, no durable state), SQLite (durable, one
// process) and PostgreSQL (a replica: every event of the turn written to
// the shared log and announced).
func BenchmarkTurn(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchTurns(b, nil) })
	b.Run("sqlite", func(b *testing.B) {
		benchTurns(b, openSQLite(b, filepath.Join(b.TempDir(), "chat.db")))
	})
	b.Run("postgres", func(b *testing.B) {
		url := postgresURL(b)
		st, err := pgstore.Open(context.Background(), url, pgstore.WithSchema(freshSchema(b, url)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(st.Close)
		benchTurns(b, st)
	})
}

// BenchmarkImportEndpoint posts a 4 MiB export (2,048 messages of 2 KiB)
// to POST /api/sessions/import, in process (ServeHTTP, a MemStore): B/op
// is what one import allocates, which bounds the memory it can hold
// (TestImportAllocations holds it under 3 bytes per byte of the document).
func BenchmarkImportEndpoint(b *testing.B) {
	srv, err := NewServer(Options{Model: "m", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	doc := bigExport(b, 2048, 2048)
	const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/api/sessions/import", bytes.NewReader(doc))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: ownerCookie, Value: secret})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
