package mcptest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The npm folder of the reference servers, relative to the module's root,
// and the files in it that the helpers use.
const (
	npmFolder         = "mcpclient/testdata/npm"
	everythingScript  = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	loopbackPreload   = "force-loopback.cjs"
	webcryptoPreload  = "node18-webcrypto.cjs"
	everythingTimeout = 30 * time.Second // from starting node to its readiness line
)

// Everything returns the node command and the path of the installed
// @modelcontextprotocol/server-everything launcher (dist/index.js, whose
// first argument selects the transport: stdio, sse or streamableHttp). It
// skips t when node is not on PATH or the package is not installed, saying
// to run `npm ci` in mcpclient/testdata/npm, or fails t under
// PLANROUND_REQUIRE_ALL=1.
func Everything(t testing.TB) (node string, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node is not on PATH: install Node.js (>= 18) to run @modelcontextprotocol/server-everything")
	}
	dir := npmDir(t)
	script = filepath.Join(dir, everythingScript)
	if _, err := os.Stat(script); err != nil {
		unavailable(t, "@modelcontextprotocol/server-everything is not installed: run `npm ci --no-fund --no-audit` in %s", dir)
	}
	return node, script
}

// EverythingStdio returns the command that runs server-everything over
// stdio (see [Everything] for when it skips). The command preloads a shim
// that gives Node 18 the Web Crypto global the server expects. It starts
// nothing: the caller runs the command and must end the process.
func EverythingStdio(t testing.TB) (command string, args []string) {
	t.Helper()
	node, script := Everything(t)
	return node, []string{"-r", filepath.Join(npmDir(t), webcryptoPreload), script, "stdio"}
}

// EverythingHTTP starts server-everything over HTTP, transport "sse" (the
// older HTTP+SSE transport) or "streamableHttp", on a free port of
// 127.0.0.1, waits until it says it is listening, and returns the URL a
// client connects to: http://127.0.0.1:PORT/sse or http://127.0.0.1:PORT/mcp.
// The server listens on 127.0.0.1 only (a preload forces the address; the
// server itself would listen on every interface). When t ends, the server's
// process group is killed and the process waited for. See [Everything] for
// when it skips.
func EverythingHTTP(t testing.TB, transport string) (url string) {
	t.Helper()
	url, _ = startEverythingHTTP(t, transport)
	return url
}

// startEverythingHTTP is EverythingHTTP, also returning the server's pid.
func startEverythingHTTP(t testing.TB, transport string) (url string, pid int) {
	t.Helper()
	var path, ready string
	switch transport {
	case "sse":
		path, ready = "/sse", "Server is running on port "
	case "streamableHttp":
		path, ready = "/mcp", "MCP Streamable HTTP Server listening on port "
	default:
		t.Fatalf("mcptest: EverythingHTTP: transport %q is neither sse nor streamableHttp", transport)
	}
	node, script := Everything(t)
	dir := npmDir(t)
	// The port is free when asked for, but another process may take it
	// before node listens on it: then try another.
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		s := &nodeServer{log: &watchedLog{want: ready + port, ready: make(chan struct{})}, done: make(chan struct{})}
		s.cmd = exec.Command(node, "-r", filepath.Join(dir, loopbackPreload), "-r", filepath.Join(dir, webcryptoPreload), script, transport)
		s.cmd.Dir = dir
		s.cmd.Env = append(os.Environ(), "PORT="+port)
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		ownGroup(s.cmd)
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("mcptest: starting server-everything: %v", err)
		}
		go func() {
			s.err = s.cmd.Wait()
			close(s.done)
		}()
		t.Cleanup(s.stop)

		timer := time.NewTimer(everythingTimeout)
		select {
		case <-s.log.ready:
			timer.Stop()
			return "http://127.0.0.1:" + port + path, s.cmd.Process.Pid
		case <-s.done:
			timer.Stop()
			if strings.Contains(s.log.String(), "EADDRINUSE") && attempt < 3 {
				continue
			}
			t.Fatalf("mcptest: server-everything (%s) ended before it was ready: %v\n%s", transport, s.err, s.log)
		case <-timer.C:
			t.Fatalf("mcptest: server-everything (%s) did not say %q within %v:\n%s", transport, ready+port, everythingTimeout, s.log)
		}
	}
}

// nodeServer is a running server-everything.
type nodeServer struct {
	cmd  *exec.Cmd
	log  *watchedLog
	done chan struct{} // closed when cmd.Wait returned
	err  error         // what cmd.Wait returned; read after done
}

// stop kills the server's process group, unless the server is already
// reaped (its pid may then belong to another process), and waits for it.
func (s *nodeServer) stop() {
	select {
	case <-s.done:
	default:
		killGroup(s.cmd.Process.Pid)
		<-s.done
	}
}

// watchedLog keeps the end of a server's output and closes ready once the
// output holds a line containing want.
type watchedLog struct {
	mu    sync.Mutex // guards the fields below
	want  string
	ready chan struct{}
	found bool
	tail  []byte // the output's last logLimit bytes
	line  []byte // the line being written
}

// logLimit bounds how much output a watchedLog keeps.
const logLimit = 64 << 10

func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, p...)
	if len(w.tail) > logLimit {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-logLimit:]...)
	}
	if w.found {
		return len(p), nil
	}
	for _, b := range p {
		if b != '\n' {
			if len(w.line) < logLimit {
				w.line = append(w.line, b)
			}
			continue
		}
		// Compare the whole number: port 3800 must not match 38001.
		if bytes.HasSuffix(bytes.TrimRight(w.line, "\r "), []byte(w.want)) {
			w.found = true
			close(w.ready)
			break
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.tail)
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mcptest: looking for a free port: %v", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// npmDir returns the npm folder of the module the test runs in.
func npmDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(moduleRoot(t), filepath.FromSlash(npmFolder))
}

// moduleRoot returns the root of the module the test runs in, found by
// walking up from the working directory (a test runs in its package's
// folder) to the go.mod of this module.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/planround/planround\n")) {
			return dir
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("mcptest: %v", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("mcptest: no go.mod of github.com/planround/planround above the working directory")
		}
		dir = parent
	}
}
