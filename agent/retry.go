package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// retryBase is the wait before the first retry of a request; each further
// retry waits twice as long, up to 16 times retryBase. A variable so that
// tests can shorten it.
var retryBase = 500 * time.Millisecond

// maxRetryAfter is the longest wait a response may ask for
// (Retry-After, retry-after-ms) and still be retried; a longer one ends the
// request with that response.
const maxRetryAfter = 60 * time.Second

// errH2NotEstablished is the text of net/http's error for an HTTP/2
// connection that closed before its first request was sent on it. net/http
// calls GotConn before it finds that out, so this error is the one way to
// tell that such a request never reached the server.
const errH2NotEstablished = "http2: client conn could not be established"

// retryRequests returns the outermost openai-go middleware of every model
// request: it sends the request again, up to maxRetries times, when that
// cannot make the provider process it twice.
//
// A response with status 408, 409, 429 or 5xx is retried, as openai-go
// does: its x-should-retry header, when "true" or "false", decides instead
// of the status, and the wait is its retry-after-ms or Retry-After (seconds
// or an HTTP date), else a backoff; a response that asks for a wait longer
// than maxRetryAfter is returned as it is. A request that failed without a
// response is retried only when it provably never reached the server (see
// connTrace.unsent), and never when the request's context ended or the
// server's certificate was refused. The backoff is retryBase × 2^retry, at
// most 16 × retryBase, less up to a quarter of jitter; the waits end with
// the request's context.
//
// The middlewares after this one (a host's, then releaseBody) run once per
// attempt. A request that failed without a response ends with a
// *ConnectionError, unless its context ended: then with the error as it
// came (openai-go reports the context's error).
func retryRequests(maxRetries int) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		ctx := req.Context()
		retries := maxRetries
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			retries = 0 // the body cannot be sent again
		}
		// openai-go sends the attempt's number only when the host did not set
		// the header itself.
		countAttempts := req.Header.Get("X-Stainless-Retry-Count") == "0"
		for attempt := 0; ; attempt++ {
			trace := new(connTrace)
			tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				GetConn: trace.getConn,
				GotConn: trace.gotConn,
			})
			var r *http.Request
			if attempt == 0 {
				r = req.WithContext(tctx) // openai-go gave it a fresh body
			} else {
				r = req.Clone(tctx)
				if req.Body != nil && req.Body != http.NoBody {
					body, err := req.GetBody()
					if err != nil {
						return nil, err
					}
					r.Body = body
				}
				if countAttempts {
					r.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(attempt))
				}
			}
			resp, err := next(r)
			if err != nil {
				if r.Body != nil {
					r.Body.Close()
				}
				if ctx.Err() != nil {
					return nil, err // the run was interrupted
				}
				unsent := trace.unsent(err)
				if !unsent || attempt >= retries || !retryableError(err) {
					return nil, &ConnectionError{Sent: !unsent, Attempts: attempt + 1, Err: err}
				}
				if err := waitRetry(ctx, backoff(attempt)); err != nil {
					return nil, err
				}
				continue
			}
			if attempt >= retries || !retryableResponse(resp) {
				return resp, nil
			}
			delay, ok := retryAfter(resp)
			if !ok {
				return resp, nil // it asks for too long a wait
			}
			if delay < 0 {
				delay = backoff(attempt)
			}
			if resp.Body != nil {
				resp.Body.Close()
			}
			if err := waitRetry(ctx, delay); err != nil {
				return nil, err
			}
		}
	}
}

// connTrace records what net/http did to get a request's connection. Its
// hooks may run on another goroutine than the request's.
type connTrace struct {
	getting atomic.Bool // GetConn was called: net/http began to get a connection
	got     atomic.Bool // GotConn was called: the request could be written
}

func (t *connTrace) getConn(string)                { t.getting.Store(true) }
func (t *connTrace) gotConn(httptrace.GotConnInfo) { t.got.Store(true) }

// unsent reports whether a request that failed with err provably never
// reached the server: net/http began to get a connection and never got one,
// the default client's pool could make no connection for it (see
// connPool), or the HTTP/2 connection it got closed before its first
// request. A transport that calls neither hook proves nothing.
func (t *connTrace) unsent(err error) bool {
	if t.getting.Load() && !t.got.Load() || errors.Is(err, errDialFailed) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == errH2NotEstablished {
			return true
		}
	}
	return false
}

// retryableError reports whether a request that never reached the server
// may succeed when sent again: not when a context ended (the run's, or
// the client's Timeout), nor when the TLS handshake refused the server's
// certificate or the server does not speak TLS.
func retryableError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var (
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		roots     x509.SystemRootsError
	)
	return !errors.As(err, &verify) && !errors.As(err, &record) &&
		!errors.As(err, &authority) && !errors.As(err, &hostname) &&
		!errors.As(err, &invalid) && !errors.As(err, &roots)
}

// retryableResponse reports whether resp asks for the request to be sent
// again: its x-should-retry header says so, or, without one, its status is
// 408, 409, 429 or 5xx.
func retryableResponse(resp *http.Response) bool {
	switch resp.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return resp.StatusCode >= http.StatusInternalServerError
}

// retryAfter returns the wait resp asks for before a retry, from its
// retry-after-ms header, else its Retry-After (seconds or an HTTP date);
// -1 when it asks for none. ok is false when the wait is longer than
// maxRetryAfter.
func retryAfter(resp *http.Response) (delay time.Duration, ok bool) {
	for _, h := range [...]struct {
		name string
		unit time.Duration
	}{{"Retry-After-Ms", time.Millisecond}, {"Retry-After", time.Second}} {
		v := resp.Header.Get(h.name)
		if v == "" {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			if n != n || n < 0 { // NaN or negative: not a wait
				continue
			}
			if n > float64(maxRetryAfter)/float64(h.unit) { // +Inf too
				return 0, false
			}
			return time.Duration(n * float64(h.unit)), true
		}
		if h.unit == time.Second {
			if at, err := http.ParseTime(v); err == nil {
				d := max(time.Until(at), 0)
				if d > maxRetryAfter {
					return 0, false
				}
				return d, true
			}
		}
	}
	return -1, true
}

// backoff returns the wait before retry number retry (0 for the first):
// retryBase × 2^retry, at most 16 × retryBase, less up to a quarter.
func backoff(retry int) time.Duration {
	d := retryBase << min(retry, 4)
	if j := d / 4; j > 0 {
		d -= rand.N(j)
	}
	return d
}

// waitRetry waits for d, or until ctx ends, then returns ctx's error.
func waitRetry(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
