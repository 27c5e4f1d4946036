package httpjson

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// decoding is a handler that decodes a JSON body of at most 64 bytes.
var decoding = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	var v map[string]any
	if Decode(w, r, &v, 64) {
		WriteJSON(w, http.StatusOK, v)
	}
})

// TestDecodeWantsJSON: a body that does not say it is JSON is refused with
// 415 before it is read (a form post from another site cannot be one); a
// charset is fine. Other refusals: not POST, too large, empty, malformed.
func TestDecodeWantsJSON(t *testing.T) {
	for _, tc := range []struct {
		method, ct, body string
		status           int
	}{
		{"POST", "", `{"a":1}`, http.StatusUnsupportedMediaType},
		{"POST", "text/plain", `{"a":1}`, http.StatusUnsupportedMediaType},
		{"POST", "application/x-www-form-urlencoded", `{"a":1}`, http.StatusUnsupportedMediaType},
		{"POST", "application/jsonx", `{"a":1}`, http.StatusUnsupportedMediaType},
		{"GET", "application/json", `{"a":1}`, http.StatusMethodNotAllowed},
		{"POST", "application/json", `{"a":"` + strings.Repeat("x", 100) + `"}`, http.StatusRequestEntityTooLarge},
		{"POST", "application/json", ``, http.StatusBadRequest},
		{"POST", "application/json", `{"a":`, http.StatusBadRequest},
		{"POST", "application/json", `{"a":1}{"b":2}`, http.StatusBadRequest},
		{"POST", "application/json; charset=utf-8", `{"a":1}`, http.StatusOK},
	} {
		req := httptest.NewRequest(tc.method, "/x", strings.NewReader(tc.body))
		if tc.ct != "" {
			req.Header.Set("Content-Type", tc.ct)
		}
		rec := httptest.NewRecorder()
		decoding.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s %q %.20q: status %d, want %d (%s)", tc.method, tc.ct, tc.body, rec.Code, tc.status, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %q %.20q: answered %q, want JSON", tc.method, tc.ct, tc.body, ct)
		}
	}
}

// TestSlowBodyTimesOut: behind a server with a read deadline, a body that
// trickles in is answered 408 when the deadline passes.
func TestSlowBodyTimesOut(t *testing.T) {
	srv := httptest.NewUnstartedServer(decoding)
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the client's own deadline: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
}
