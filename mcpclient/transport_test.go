package mcpclient

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// Every transport lists all tools (over pages) and calls them: text,
// images, error results, progress.
func TestTransportsCallTools(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			f := newFixture(t, tr)
			c := newClient(t, Options{}, f.cfg)

			var names []string
			for _, tl := range c.Tools() {
				names = append(names, tl.Definition().Name)
			}
			if !slices.Equal(names, testTools) {
				t.Fatalf("tools = %v, want %v (all pages)", names, testTools)
			}

			got, err := run(t, tool(t, c, "echo"), `{"text":"hello"}`, nil)
			if err != nil || got != "hello" {
				t.Errorf("echo = %q, %v; want hello", got, err)
			}
			got, err = run(t, tool(t, c, "image"), `{}`, nil)
			if want := "a tiny image\n[image captured, mimeType=image/png]"; err != nil || got != want {
				t.Errorf("image = %q, %v; want %q", got, err, want)
			}
			_, err = run(t, tool(t, c, "fail"), `{"message":"the disk is full"}`, nil)
			if err == nil || err.Error() != "the disk is full" {
				t.Errorf("fail: err = %v, want the error result's text", err)
			}

			var p buffer
			got, err = run(t, tool(t, c, "progress"), `{"steps":3,"messages":false}`, &p)
			if err != nil || got != "progress: done 3 steps" {
				t.Errorf("progress = %q, %v", got, err)
			}
			// The last notification may be lost by mcp-go's HTTP server.
			if out := p.String(); !strings.HasPrefix(out, "step 1/3\nstep 2/3\n") {
				t.Errorf("progress output = %q, want step i/N lines", out)
			}
			p = buffer{}
			if _, err = run(t, tool(t, c, "progress"), `{"steps":2}`, &p); err != nil {
				t.Fatal(err)
			}
			if out := p.String(); !strings.HasPrefix(out, "step 1 of 2\n") {
				t.Errorf("progress output = %q, want the messages", out)
			}
		})
	}
}

// Cancelling a call's context makes it return at once, and the server sees
// the call cancelled.
func TestTransportsCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			f := newFixture(t, tr)
			c := newClient(t, Options{}, f.cfg)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := tool(t, c, "slow").Execute(ctx, []byte(`{}`), &buffer{})
				done <- err
			}()
			time.Sleep(100 * time.Millisecond) // the call is under way
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not return after its context was cancelled")
			}
			waitCancelled(t, c, 1)

			// The connection is still good.
			if got, err := run(t, tool(t, c, "echo"), `{"text":"still here"}`, nil); err != nil || got != "still here" {
				t.Errorf("echo after a cancel = %q, %v", got, err)
			}
		})
	}
}

// A server that never answers (and ignores cancellation) is cut by the call
// timeout, and by a cancelled context.
func TestTransportsNeverAnswers(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			f := newFixture(t, tr)
			f.cfg.CallTimeout = 300 * time.Millisecond
			c := newClient(t, Options{}, f.cfg)

			_, err := run(t, tool(t, c, "hang"), `{}`, nil)
			if err == nil || !strings.Contains(err.Error(), "no result within the call timeout of 300ms") {
				t.Fatalf("err = %v, want the call timeout", err)
			}
			if !strings.Contains(err.Error(), `mcp server "test"`) {
				t.Errorf("err = %v, want the server named", err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err = tool(t, c, "hang").Execute(ctx, []byte(`{}`), &buffer{})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		})
	}
}

// A server that goes away in the middle of a call fails the call at once.
func TestTransportsCrashMidCall(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			f := newFixture(t, tr)
			f.cfg.CallTimeout = time.Minute // the failure must not wait for it
			c := newClient(t, Options{}, f.cfg)

			_, err := run(t, tool(t, c, "crash"), `{}`, nil)
			if err == nil || !errors.Is(err, errLost) {
				t.Fatalf("err = %v, want a lost connection", err)
			}
			if tr == TransportStdio && !strings.Contains(err.Error(), "exit status 3") {
				t.Errorf("err = %v, want the exit status", err)
			}
			if st := c.Servers()[0]; st.State != StateDown || st.Error == "" {
				t.Errorf("status = %+v, want down with an error", st)
			}
		})
	}
}

// An HTTP server that accepts connections and never answers does not hold
// New beyond the start timeout.
func TestRemoteServerSilentAtStart(t *testing.T) {
	for _, tr := range []Transport{TransportSSE, TransportHTTP} {
		t.Run(string(tr), func(t *testing.T) {
			leaktest.Check(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var conns []net.Conn
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c) // held, never answered
					mu.Unlock()
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				<-done
				mu.Lock()
				defer mu.Unlock()
				for _, c := range conns {
					c.Close()
				}
			})

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := New(ctx, []ServerConfig{{Name: "silent", Transport: tr, URL: "http://" + ln.Addr().String() + "/mcp", StartTimeout: 500 * time.Millisecond}}, Options{})
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), "no answer within the start timeout of 500ms") {
				t.Errorf("err = %v, want the start timeout", err)
			}
		})
	}
}

// A server of an older protocol that ignores the discovery request which
// opens protocol 2026-07-28, instead of refusing it, is still started
// within a start timeout shorter than mcp-go's own wait for that request (5
// seconds); pinning its version skips the request.
func TestLegacyServerIgnoringDiscover(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "pinned"}[pinned], func(t *testing.T) {
			leaktest.Check(t)
			cfg := stdioConfig(t, "legacy", "-mode=legacy")
			cfg.StartTimeout = 3 * time.Second
			if pinned {
				cfg.ProtocolVersion = "2025-11-25"
			}
			c := newClient(t, Options{}, cfg)
			if got, err := run(t, tool(t, c, "hello"), `{}`, nil); err != nil || got != "hi from legacy" {
				t.Errorf("hello = %q, %v", got, err)
			}
			ignored, err := run(t, tool(t, c, "ignored"), `{}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if asked := strings.Contains(ignored, "server/discover"); asked == pinned {
				t.Errorf("discovery request sent: %v; pinned: %v (the server ignored %s)", asked, pinned, ignored)
			}
		})
	}
}
