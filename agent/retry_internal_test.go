package agent

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestUnsent checks what proves that a request never reached the server.
func TestUnsent(t *testing.T) {
	h2 := &url.Error{Op: "Post", URL: "https://model.invalid/v1", Err: errors.New(errH2NotEstablished)}
	other := &url.Error{Op: "Post", URL: "https://model.invalid/v1", Err: errors.New("http2: client connection lost")}
	for _, tt := range []struct {
		name         string
		getting, got bool
		err          error
		want         bool
	}{
		{"no connection got", true, false, other, true},
		{"connection got", true, true, other, false},
		{"no hook fired", false, false, other, false},
		{"HTTP/2 connection closed before its first request", true, true, h2, true},
	} {
		var tr connTrace
		tr.getting.Store(tt.getting)
		tr.got.Store(tt.got)
		if got := tr.unsent(tt.err); got != tt.want {
			t.Errorf("%s: unsent = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRetryAfter checks the waits a response asks for.
func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		header http.Header
		delay  time.Duration // -1: none asked for
		ok     bool
	}{
		{http.Header{}, -1, true},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"5"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"60"}}, 60 * time.Second, true},
		{http.Header{"Retry-After": {"61"}}, 0, false},
		{http.Header{"Retry-After": {"1e400"}}, 0, false},
		{http.Header{"Retry-After": {"-3"}}, -1, true},
		{http.Header{"Retry-After": {"soon"}}, -1, true},
		{http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, 0, true},
		{http.Header{"Retry-After": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}}, 0, false},
	} {
		delay, ok := retryAfter(&http.Response{Header: tt.header})
		if delay != tt.delay || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tt.header, delay, ok, tt.delay, tt.ok)
		}
	}
}

// TestBackoff checks the backoff's bounds: retryBase × 2^retry, at most 16
// × retryBase, less at most a quarter.
func TestBackoff(t *testing.T) {
	for retry, want := range []time.Duration{500, 1000, 2000, 4000, 8000, 8000, 8000} {
		want *= time.Millisecond
		for range 100 {
			if d := backoff(retry); d > want || d <= want*3/4 {
				t.Fatalf("backoff(%d) = %v, want in (%v, %v]", retry, d, want*3/4, want)
			}
		}
	}
	if d := backoff(1 << 20); d > 8*time.Second {
		t.Errorf("backoff(1<<20) = %v, want at most 8s", d)
	}
}
