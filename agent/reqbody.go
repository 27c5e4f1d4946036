package agent

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/openai/openai-go/v3/option"
)

// releaseBody is the innermost openai-go middleware of every model request:
// it lets go of the request's body once it is no longer needed, instead of
// when the streamed response ends.
//
// net/http keeps the request it sends, and so its body, until the
// response's body is closed: for a stream, the whole round. The body is the
// whole conversation as JSON (twice: openai-go's GetBody holds the bytes it
// rewinds for a retry), so without this a run mid-stream would hold a copy
// of its history for nothing. The request handed on reads the body through
// a reader that drops it at its end, and can be rewound (net/http retries a
// request on a connection that was closed before it was used) only until
// the response's headers have come.
func releaseBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	captureBody(req) // for the API log, when its context asks
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return next(req)
	}
	rewind := new(atomic.Pointer[func() (io.ReadCloser, error)])
	rewind.Store(&req.GetBody)
	sent := *req // a shallow copy, as http.Request.WithContext makes
	sent.Body = &droppingBody{rc: req.Body}
	sent.GetBody = func() (io.ReadCloser, error) {
		get := rewind.Load()
		if get == nil {
			return nil, errBodyReleased
		}
		rc, err := (*get)()
		if err != nil {
			return nil, err
		}
		return &droppingBody{rc: rc}, nil
	}
	resp, err := next(&sent)
	rewind.Store(nil)
	return resp, err
}

// errBodyReleased is what GetBody returns once the response has come.
var errBodyReleased = errors.New("agent: the request's body was released once its response came")

// droppingBody reads rc and lets go of it at its end or when closed. The
// transport may close it from another goroutine than the one reading.
type droppingBody struct {
	mu sync.Mutex
	rc io.ReadCloser
}

func (b *droppingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.rc.Close()
		b.rc = nil
	}
	return n, err
}

func (b *droppingBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rc == nil {
		return nil
	}
	err := b.rc.Close()
	b.rc = nil
	return err
}
