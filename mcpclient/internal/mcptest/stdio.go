package mcptest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
// command's documentation lists its tools, modes and flags). The server is
// built once per test process with the go command found on PATH, into a
// temporary directory that all tests of the process share. StdioServer
// skips t when there is no go command, or fails it under
// PLANROUND_REQUIRE_ALL=1; a failed build fails t.
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
	built.once.Do(func() { built.bin, built.out, built.err = buildStdioServer(goBin) })
	if built.err != nil {
		t.Fatalf("go build %s: %v\n%s", stdioServerPackage, built.err, built.out)
	}
	return built.bin, slices.Clone(flags)
}

// tempPrefix starts the names of the directories the binary is built in.
const tempPrefix = "planround-mcptest-"

// buildStdioServer builds the server into a new temporary directory. No
// test knows when the process's last test is done with the binary, so the
// directory stays behind; instead each build removes the directories that
// earlier builds left more than a day ago, far longer than any test process
// lives.
func buildStdioServer(goBin string) (bin string, out []byte, err error) {
	removeStaleBuilds(24 * time.Hour)
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "stdioserver")
	ctx, cancel := context.WithTimeout(context.Background(), buildLimit)
	defer cancel()
	out, err = exec.CommandContext(ctx, goBin, "build", "-o", bin, stdioServerPackage).CombinedOutput()
	return bin, out, err
}

// removeStaleBuilds removes the build directories older than age.
func removeStaleBuilds(age time.Duration) {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}
