package mcptest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// stdioServerPackage is the import path of the stdio test server.
const stdioServerPackage = "github.com/planround/planround/mcpclient/internal/mcptest/stdioserver"

// buildLimit bounds the build of the stdio test server. With a warm build
// cache it takes a second or two; a cold one compiles mcp-go and the
// standard library (18 s on two cores).
const buildLimit = 5 * time.Minute

// built is the stdio test server, built once per test process.
var built struct {
	once sync.Once
	bin  string
	out  []byte // the go command's output when the build failed
	err  error
}

// StdioServer returns the command that runs the stdio test server with the
// given flags (for instance "-mode=garbage-before"; the stdioserver
// command's documentation lists its modes and flags, package testserver's
// its tools). The server is
// built once per test process with the go command found on PATH.
// StdioServer skips t when there is no go command, or fails it under
// PLANROUND_REQUIRE_ALL=1; a failed build fails t.
//
// The binary lives in a directory of the system's temporary directory that
// belongs to this checkout of the module (its name holds a hash of the
// module's path and the user id). Each test process builds into a
// directory of its own and renames the result over the shared binary, so a
// server already running keeps its file, and test runs leave one binary
// behind per checkout rather than one each.
//
// The server is built without the race detector even when the tests have
// it: it is the tests' peer, not the code under test, and under the
// detector it would answer several times slower (a 64 MiB answer takes
// seconds) and linger a second at every exit.
//
// StdioServer starts nothing: the caller runs the command and must end the
// process.
func StdioServer(t testing.TB, flags ...string) (command string, args []string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		unavailable(t, "go is not on PATH: cannot build the stdio MCP test server")
	}
	root := moduleRoot(t)
	built.once.Do(func() { built.bin, built.out, built.err = buildStdioServer(goBin, root) })
	if built.err != nil {
		t.Fatalf("go build %s: %v\n%s", stdioServerPackage, built.err, built.out)
	}
	return built.bin, slices.Clone(flags)
}

// buildStdioServer builds the server in the module at root and returns the
// binary's path.
func buildStdioServer(goBin, root string) (bin string, out []byte, err error) {
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("planround-mcptest-%d-%x", os.Getuid(), sum[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	// Build in a directory of this process's own, then rename the binary
	// over the shared one: a process that runs the old binary keeps it.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), buildLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(tmp, "stdioserver"), stdioServerPackage)
	cmd.Dir = root
	if out, err = cmd.CombinedOutput(); err != nil {
		return "", out, err
	}
	bin = filepath.Join(dir, "stdioserver")
	return bin, nil, os.Rename(filepath.Join(tmp, "stdioserver"), bin)
}
