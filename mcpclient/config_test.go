package mcpclient

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfgs, err := ParseConfig([]byte(`{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "env": {"DEBUG": "1"}, "cwd": "/srv"},
		"github": {"url": "https://api.example.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}, "autoApprove": ["search"]},
		"legacy": {"type": "sse", "url": "http://127.0.0.1:3001/sse", "callTimeout": 90, "startTimeout": "5s", "protocolVersion": "2024-11-05"},
		"browser": {"command": "browser-mcp", "isolation": "per_conversation", "disabledTools": ["eval"], "skipApproval": true, "skipApprovalTools": ["look"], "someOtherClient": {"x": 1}},
		"streamable": {"type": "streamable-http", "url": "http://127.0.0.1:3002/mcp"},
		"off": {"command": "nothing", "disabled": true}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerConfig{
		{Name: "browser", Command: "browser-mcp", Isolation: IsolationPerConversation, DisabledTools: []string{"eval"}, SkipApproval: true, SkipApprovalTools: []string{"look"}},
		{Name: "files", Command: "npx", Args: []string{"-y", "server-filesystem", "/tmp"}, Env: map[string]string{"DEBUG": "1"}, Dir: "/srv"},
		{Name: "github", URL: "https://api.example.com/mcp/", Headers: map[string]string{"Authorization": "Bearer ${GITHUB_TOKEN}"}, SkipApprovalTools: []string{"search"}},
		{Name: "legacy", Transport: TransportSSE, URL: "http://127.0.0.1:3001/sse", CallTimeout: 90 * time.Second, StartTimeout: 5 * time.Second, ProtocolVersion: "2024-11-05"},
		{Name: "streamable", Transport: TransportHTTP, URL: "http://127.0.0.1:3002/mcp"},
	}
	if !reflect.DeepEqual(cfgs, want) {
		t.Errorf("got\n%+v\nwant\n%+v", cfgs, want)
	}
	if tr := cfgs[1].transport(); tr != TransportStdio {
		t.Errorf("files: transport %q, want stdio inferred", tr)
	}
	if tr := cfgs[2].transport(); tr != TransportHTTP {
		t.Errorf("github: transport %q, want http inferred", tr)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`[]`, "cannot unmarshal"},
		{`{}`, `no "mcpServers"`},
		{`{"mcpServers": {}, "servers": {}}`, "both"},
		{`{"mcpServers": {"x": {}}}`, "neither a command nor a url"},
		{`{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}`, "a command, not a url"},
		{`{"mcpServers": {"x": {"type": "sse"}}}`, "needs a url"},
		{`{"mcpServers": {"x": {"type": "stdio", "url": "http://b"}}}`, "needs a command"},
		{`{"mcpServers": {"x": {"type": "ws", "url": "ws://b"}}}`, `unknown transport "ws"`},
		{`{"mcpServers": {"x": {"command": "a", "isolation": "per_user"}}}`, `unknown isolation "per_user"`},
		{`{"mcpServers": {"x": {"command": "a", "callTimeout": "soon"}}}`, "invalid duration"},
		{`{"mcpServers": {"x": {"command": "a", "callTimeout": true}}}`, "want a string"},
		{`{"mcpServers": {"x": {"command": "a", "callTimeout": 1e300}}}`, "want a string"},
		{`{"mcpServers": {"x": {"command": ["a"]}}}`, "cannot unmarshal"},
	} {
		_, err := ParseConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.json, err, tc.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"servers": {"a": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgs, err := LoadConfig(path)
	if err != nil || len(cfgs) != 1 || cfgs[0].Name != "a" {
		t.Errorf("LoadConfig = %+v, %v", cfgs, err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want the file named", err)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cr3t-t0ken", "HOST": "example.com", "EMPTY": "", "PW": "hunter22"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	e, err := expand(ServerConfig{
		Name:    "x",
		Command: "${HOME_BIN:-/usr/bin}/server",
		Args:    []string{"--token=${TOKEN}", "plain $HOST", "${EMPTY:-fallback}"},
		Env:     map[string]string{"API_KEY": "literal-key", "MODE": "production", "URL": "https://${HOST}/"},
		Headers: map[string]string{"Authorization": "Bearer ${TOKEN}", "X-Plain": "visible-but-secret"},
		URL:     "https://user:${PW}@${HOST}/mcp",
	}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if e.Command != "/usr/bin/server" || e.Args[0] != "--token=s3cr3t-t0ken" || e.Args[1] != "plain $HOST" || e.Args[2] != "fallback" {
		t.Errorf("command %q args %q", e.Command, e.Args)
	}
	if e.Env["URL"] != "https://example.com/" || e.Headers["Authorization"] != "Bearer s3cr3t-t0ken" || e.URL != "https://user:hunter22@example.com/mcp" {
		t.Errorf("env %v headers %v url %q", e.Env, e.Headers, e.URL)
	}
	red := newRedactor(e.secrets)
	msg := red.String("s3cr3t-t0ken Bearer s3cr3t-t0ken literal-key production hunter22 example.com visible-but-secret ok")
	if want := "[redacted] [redacted] [redacted] production [redacted] [redacted] [redacted] ok"; msg != want {
		t.Errorf("redacted %q, want %q", msg, want)
	}

	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Name: "x", Headers: map[string]string{"A": "${MISSING}"}}, "header A: environment variable MISSING is not set"},
		{ServerConfig{Name: "x", Args: []string{"${EMPTY}"}}, "environment variable EMPTY is not set"},
		{ServerConfig{Name: "x", Args: []string{"${TOKEN"}}, "without its closing"},
		{ServerConfig{Name: "x", Args: []string{"${1X}"}}, "not a variable name"},
		{ServerConfig{Name: "x", URL: "ftp://${HOST}/"}, `want http or https, not "ftp"`},
		{ServerConfig{Name: "x", URL: "http://[::1/${TOKEN}"}, "missing ']'"},
	} {
		_, err := expand(tc.cfg, lookup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// New refuses bad configurations before it starts anything.
func TestNewRefusesConfigs(t *testing.T) {
	t.Setenv("PLANROUND_TEST_UNSET", "")
	for _, tc := range []struct {
		cfgs []ServerConfig
		want string
	}{
		{[]ServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, `two servers named "a"`},
		{[]ServerConfig{{Name: "", Command: "x"}}, "without a name"},
		{[]ServerConfig{{Name: "a", Command: "x", Env: map[string]string{"T": "${PLANROUND_TEST_UNSET}"}}}, "PLANROUND_TEST_UNSET is not set"},
		{[]ServerConfig{{Name: "a", Command: "/nonexistent/mcp-server"}}, "no such file"},
	} {
		c, err := New(context.Background(), tc.cfgs, Options{})
		if err == nil {
			c.Close()
			t.Errorf("%+v: New succeeded", tc.cfgs)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mcpclient: ") {
			t.Errorf("%+v: err = %v, want %q", tc.cfgs, err, tc.want)
		}
	}
}
