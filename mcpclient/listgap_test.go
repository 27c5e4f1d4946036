package mcpclient

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
)

// heldListen serves h, but holds each subscriptions/listen request until
// release is closed (or the request ends), telling of its arrival on
// arrived.
type heldListen struct {
	h       http.Handler
	arrived chan struct{}
	release chan struct{}
}

func (l *heldListen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"`+string(mcp.MethodSubscriptionsListen)+`"`) {
			select {
			case l.arrived <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			select {
			case <-l.release:
			case <-r.Context().Done():
				return
			}
		}
	}
	l.h.ServeHTTP(w, r)
}

// TestToolRemovedBeforeSubscription: at protocol 2026-07-28 a change of the
// tool list the server makes after the client read the list but before the
// subscription to list changes is established is notified to nobody; the
// client reads the list again once the server acknowledged the
// subscription, so it drops the tool removed in that gap without another
// notification.
func TestToolRemovedBeforeSubscription(t *testing.T) {
	leaktest.Check(t, http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	files := newChangingServer(t, mcp.NewTool("wipe", mcp.WithString("key")), mcp.NewTool("read", mcp.WithString("key")))
	held := &heldListen{
		h:       server.NewStreamableHTTPServer(files.srv),
		arrived: make(chan struct{}),
		release: make(chan struct{}),
	}
	ts := httptest.NewServer(held)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	cfg := files.config("files")
	cfg.Transport, cfg.URL = TransportHTTP, ts.URL+"/mcp"
	c := newClient(t, Options{KV: new(memory.MemStore)}, cfg)
	if got := c.entries[0].shared.current().protocol; !mcp.IsModernProtocol(got) {
		t.Fatalf("the connection speaks protocol %q, want 2026-07-28 or later", got)
	}
	reg, err := agent.NewToolRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	if got := c.Servers()[0].Tools; !slices.Contains(got, "wipe") || !slices.Contains(got, "read") {
		t.Fatalf("Servers lists %v, want read and wipe", got)
	}

	// The client has read the list and asked to subscribe; the server has
	// not yet established the subscription when it removes wipe, so the
	// list change it sends reaches no one.
	select {
	case <-held.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not ask to subscribe to list changes")
	}
	files.srv.DeleteTools("wipe")
	close(held.release)

	waitFor(t, "wipe is out of the registry", func() bool {
		_, _, ok := reg.Lookup("wipe")
		return !ok
	})
	st := c.Servers()[0]
	if slices.Contains(st.Tools, "wipe") || !slices.Contains(st.Tools, "read") {
		t.Errorf("after the server removed wipe, Servers lists %v, want [read]", st.Tools)
	}
}

// TestListenAcknowledgedEitherOrder: the list is read again once, whether
// the server's acknowledgement comes before the entry took the
// connection's first list or after it, and only once both happened (a
// list read again before the first one was taken would be overwritten by
// it).
func TestListenAcknowledgedEitherOrder(t *testing.T) {
	for _, ackFirst := range []bool{true, false} {
		var relists int
		e := &serverEntry{onListChanged: func() { relists++ }}
		c := newConn(e)
		first, second := c.tookList, c.listenAcknowledged
		if ackFirst {
			first, second = c.listenAcknowledged, c.tookList
		}
		first()
		if relists != 0 {
			t.Errorf("ack first %v: the list was read again after one of the two", ackFirst)
		}
		second()
		if relists != 1 {
			t.Errorf("ack first %v: the list was read again %d times, want once", ackFirst, relists)
		}
	}
}
