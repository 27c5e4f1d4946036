package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stdioServerPackage is the stdio MCP test server of package mcpclient's
// tests (its documentation lists its tools). Go keeps its package out of
// reach of these tests' imports, not of the go command.
const stdioServerPackage = "github.com/planround/planround/mcpclient/internal/mcptest/stdioserver"

// stdioBuild is the stdio MCP test server, built once for the tests that
// need it; TestMain removes it.
var stdioBuild struct {
	once     sync.Once
	dir, bin string
	out      []byte
	err      error
}

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgsEnv); ok {
		os.Exit(childMain(args)) // a web chat process of a test: see startChild
	}
	// A program the tests start without -db keeps its data in the user's
	// data folder: a folder of the tests' here, never the user's.
	data, err := os.MkdirTemp("", "planround-webchat-data-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", data)
	code := m.Run()
	os.RemoveAll(data)
	if stdioBuild.dir != "" {
		os.RemoveAll(stdioBuild.dir)
	}
	os.Exit(code)
}

// stdioServer returns the path of the stdio MCP test server, built without
// the race detector: it is the tests' peer, not the code under test.
func stdioServer(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal("go is not on PATH (PLANROUND_REQUIRE_ALL=1): cannot build the MCP test server")
		}
		t.Skip("go is not on PATH: cannot build the MCP test server")
	}
	stdioBuild.once.Do(func() {
		if stdioBuild.dir, stdioBuild.err = os.MkdirTemp("", "planround-mcpserver-"); stdioBuild.err != nil {
			return
		}
		stdioBuild.bin = filepath.Join(stdioBuild.dir, "stdioserver")
		stdioBuild.out, stdioBuild.err = exec.Command(goBin, "build", "-o", stdioBuild.bin, stdioServerPackage).CombinedOutput()
	})
	require.NoError(t, stdioBuild.err, "go build %s: %s", stdioServerPackage, stdioBuild.out)
	return stdioBuild.bin
}

// alive reports whether the process pid exists and has not ended: a zombie
// (ended, not yet reaped) counts as gone.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// gone checks that the process pid ends soon: a process killed a moment
// ago may not have been yet.
func gone(t *testing.T, pid int, what string) {
	t.Helper()
	assert.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 10*time.Millisecond, "%s (pid %d) outlived the web chat", what, pid)
}
