package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReleaseBody checks the middleware that lets go of a request's body:
// the transport reads the whole body and can rewind it until the response
// comes, and after that the request it keeps holds no reference to it.
func TestReleaseBody(t *testing.T) {
	body := []byte(strings.Repeat(`{"role":"user","content":"hello"}`, 100))
	req, err := http.NewRequest(http.MethodPost, "http://model.invalid/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil {
		t.Fatal("http.NewRequest gave a bytes.Reader body no GetBody")
	}
	var sent *http.Request
	resp, err := releaseBody(req, func(r *http.Request) (*http.Response, error) {
		sent = r
		if r == req {
			t.Error("the request was handed on as it came, holding its body")
		}
		// A transport that lost its connection before using it rewinds.
		again, err := r.GetBody()
		if err != nil {
			t.Fatalf("GetBody before the response: %v", err)
		}
		for _, rc := range []io.ReadCloser{r.Body, again} {
			got, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("read %d bytes (%v), want the %d sent", len(got), err, len(body))
			}
			rc.Close()
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("releaseBody = %v, %v", resp, err)
	}
	if _, err := sent.GetBody(); !errors.Is(err, errBodyReleased) {
		t.Errorf("GetBody after the response: %v, want errBodyReleased", err)
	}
	if d, ok := sent.Body.(*droppingBody); !ok || d.rc != nil {
		t.Errorf("the sent request's body is %T and still holds its reader", sent.Body)
	}
	if n, err := sent.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("reading the released body = %d, %v; want 0, EOF", n, err)
	}

	// A body closed before its end (the transport gave up) is let go too.
	d := &droppingBody{rc: io.NopCloser(bytes.NewReader(body))}
	if _, err := d.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil || d.rc != nil {
		t.Errorf("Close = %v, reader kept: %v", err, d.rc != nil)
	}

	// A request without a body, or one that cannot rewind, goes on as it
	// came.
	for _, r := range []*http.Request{
		{Method: http.MethodGet, Header: http.Header{}},
		{Method: http.MethodPost, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x"))},
	} {
		if _, err := releaseBody(r, func(got *http.Request) (*http.Response, error) {
			if got != r {
				t.Errorf("%s request with body %T was replaced", r.Method, r.Body)
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
