package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Transport is how the client talks to a server.
type Transport string

// The transports.
const (
	// TransportStdio starts the server as a subprocess and speaks to it on
	// its standard input and output.
	TransportStdio Transport = "stdio"
	// TransportSSE is the HTTP+SSE transport of protocol versions up to
	// 2024-11-05: an event stream from GET and messages by POST.
	TransportSSE Transport = "sse"
	// TransportHTTP is the streamable HTTP transport.
	TransportHTTP Transport = "http"
)

// Isolation says whether conversations share a server.
type Isolation string

// The isolation modes.
const (
	// IsolationShared (the default) runs one connection for everybody,
	// opened when the [Client] is made.
	IsolationShared Isolation = "shared"
	// IsolationPerConversation runs one instance of the server for each
	// conversation, started on the conversation's first call: state kept
	// by the server (a browser, a working directory, a shell) is never seen
	// by another conversation.
	IsolationPerConversation Isolation = "per_conversation"
)

// ServerConfig describes one MCP server.
//
// Command, Args, Env, Dir, URL and the header values may refer to
// environment variables as ${NAME}, or ${NAME:-default} for a value used
// when NAME is unset or empty. References are expanded by [New], so a
// ServerConfig (and anything that prints it) holds the reference, not the
// secret. A reference to a variable that is unset or empty, without a
// default, makes New fail. Header values, the
// values of Env variables whose names say they hold a secret (with TOKEN,
// KEY, SECRET, PASS, AUTH, CRED and the like in them), a password in the
// URL and every expanded value are treated as secrets: they are replaced
// by "[redacted]" in errors, logs, tool definitions, tool results and
// progress (also where the server wrote them JSON-escaped, a secret of
// several lines without its line breaks, or a secret split between two
// progress notifications), so neither the model nor a chunk shows them. See [Client.Tools] for a secret in a tool's name or in
// the name of one of its parameters.
type ServerConfig struct {
	// Name identifies the server in errors, logs, [Client.Servers] and
	// prefixed tool names. Names are unique within a [Client].
	Name string
	// Transport is stdio, sse or http. Empty means stdio when Command is
	// set and http when URL is.
	Transport Transport

	// Command is the program of a stdio server, looked up in PATH.
	Command string
	// Args are its arguments.
	Args []string
	// Env holds variables added to the environment the server inherits.
	Env map[string]string
	// Dir is its working directory; empty means the host's.
	Dir string

	// URL is the endpoint of an sse or http server (for sse the event
	// stream's URL, often ending in /sse; for http often ending in /mcp).
	URL string
	// Headers are sent with every HTTP request, for example
	// "Authorization": "Bearer ${GITHUB_TOKEN}".
	Headers map[string]string

	// Isolation is shared (the default) or per_conversation.
	Isolation Isolation
	// DisabledTools are the server's tools (by their MCP names) not offered
	// to the model.
	DisabledTools []string
	// SkipApproval lets every call of the server's tools run without asking
	// the Approver: only for servers that change nothing, see
	// [agent.ToolDefinition.SkipApproval].
	SkipApproval bool
	// SkipApprovalTools lists tools (by their MCP names) whose calls run
	// without asking the Approver.
	SkipApprovalTools []string
	// Trusted says the host trusts what the server says about its tools:
	// their annotations become trusted hints ([agent.ToolHints]), on which
	// a policy such as approval.ReadOnlyHints may decide. The annotations
	// of an untrusted server (the default) are shown on approval cards,
	// but decide nothing.
	Trusted bool

	// CallTimeout bounds one tool call. Zero means 5 minutes; a negative
	// value means no bound other than the run's context.
	CallTimeout time.Duration
	// StartTimeout bounds starting a server: the process or connection, the
	// handshake and the list of tools. Zero means 30 seconds.
	StartTimeout time.Duration
	// ProtocolVersion pins the MCP protocol version offered to the server.
	// Empty means the newest the client knows, falling back to the
	// initialize handshake of older versions when the server does not
	// answer the newer discovery request within a second; a version before
	// 2026-07-28 (for example 2025-11-25) skips that request, which saves
	// the second with a server that ignores requests it does not know.
	ProtocolVersion string
	// DisableTasks makes every call an ordinary tools/call, also of a tool
	// the server would run as a task (see "Tasks" in the package
	// documentation).
	DisableTasks bool

	// OAuth makes an http server one that each user authorizes: the client
	// connects to it once per user, with that user's token (see the
	// package documentation, "Authorization"). Nil means the server needs
	// no authorization, or takes a fixed token in Headers.
	OAuth *OAuthConfig
}

// The defaults of the zero values of ServerConfig's timeouts.
const (
	defaultCallTimeout  = 5 * time.Minute
	defaultStartTimeout = 30 * time.Second
)

// LoadConfig reads a JSON configuration file; see [ParseConfig].
func LoadConfig(path string) ([]ServerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcpclient: %w", err)
	}
	cfgs, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfgs, nil
}

// ParseConfig reads servers from JSON in the format MCP clients share:
//
//	{"mcpServers": {
//	  "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
//	  "github": {"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}
//	}}
//
// The key "servers" may stand for "mcpServers". A server object has
// "command", "args", "env" and "cwd" (stdio) or "url" and "headers" (sse,
// http), an optional "type" ("stdio", "sse", "http"; "streamable-http" and
// "streamableHttp" mean http), and these fields of ServerConfig:
// "isolation", "disabledTools", "skipApproval", "skipApprovalTools" (also
// read from "autoApprove"), "trusted", "callTimeout" and "startTimeout" (a
// duration such as "90s", or a number of seconds), "protocolVersion" and
// "disableTasks". A server
// with "disabled": true is left out. Other fields are ignored, so one file
// can serve several clients.
//
// The servers come sorted by name. References to environment variables
// are kept as they are; [New] expands them.
func ParseConfig(data []byte) ([]ServerConfig, error) {
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Servers    map[string]json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("mcpclient: config: %w", err)
	}
	if file.MCPServers != nil && file.Servers != nil {
		return nil, errors.New(`mcpclient: config: both "mcpServers" and "servers"; use one`)
	}
	entries := file.MCPServers
	if entries == nil {
		entries = file.Servers
	}
	if entries == nil {
		return nil, errors.New(`mcpclient: config: no "mcpServers" object`)
	}
	var cfgs []ServerConfig
	for name, raw := range entries {
		cfg, disabled, err := parseServer(name, raw)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: config: server %q: %w", name, err)
		}
		if disabled {
			continue
		}
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("mcpclient: config: %w", err)
		}
		cfgs = append(cfgs, cfg)
	}
	slices.SortFunc(cfgs, func(a, b ServerConfig) int { return strings.Compare(a.Name, b.Name) })
	return cfgs, nil
}

// fileServer is a server object of a configuration file.
type fileServer struct {
	Type              string            `json:"type"`
	Transport         string            `json:"transport"`
	Command           string            `json:"command"`
	Args              []string          `json:"args"`
	Env               map[string]string `json:"env"`
	Cwd               string            `json:"cwd"`
	URL               string            `json:"url"`
	Headers           map[string]string `json:"headers"`
	Isolation         string            `json:"isolation"`
	Disabled          bool              `json:"disabled"`
	DisabledTools     []string          `json:"disabledTools"`
	SkipApproval      bool              `json:"skipApproval"`
	SkipApprovalTools []string          `json:"skipApprovalTools"`
	AutoApprove       []string          `json:"autoApprove"`
	Trusted           bool              `json:"trusted"`
	CallTimeout       fileDuration      `json:"callTimeout"`
	StartTimeout      fileDuration      `json:"startTimeout"`
	ProtocolVersion   string            `json:"protocolVersion"`
	DisableTasks      bool              `json:"disableTasks"`
	OAuth             *OAuthConfig      `json:"oauth"`
}

func parseServer(name string, raw json.RawMessage) (cfg ServerConfig, disabled bool, err error) {
	var s fileServer
	if err := json.Unmarshal(raw, &s); err != nil {
		return cfg, false, err
	}
	typ := s.Type
	if typ == "" {
		typ = s.Transport
	}
	switch typ {
	case "streamable-http", "streamableHttp", "streamable_http":
		typ = string(TransportHTTP)
	}
	cfg = ServerConfig{
		Name:              name,
		Transport:         Transport(typ),
		Command:           s.Command,
		Args:              s.Args,
		Env:               s.Env,
		Dir:               s.Cwd,
		URL:               s.URL,
		Headers:           s.Headers,
		Isolation:         Isolation(s.Isolation),
		DisabledTools:     s.DisabledTools,
		SkipApproval:      s.SkipApproval,
		SkipApprovalTools: append(slices.Clip(s.SkipApprovalTools), s.AutoApprove...),
		Trusted:           s.Trusted,
		CallTimeout:       time.Duration(s.CallTimeout),
		StartTimeout:      time.Duration(s.StartTimeout),
		ProtocolVersion:   s.ProtocolVersion,
		DisableTasks:      s.DisableTasks,
		OAuth:             s.OAuth,
	}
	return cfg, s.Disabled, nil
}

// fileDuration is a duration in a configuration file: a string
// time.ParseDuration reads, or a number of seconds.
type fileDuration time.Duration

func (d *fileDuration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = fileDuration(v)
		return nil
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || secs > float64(1<<62)/float64(time.Second) || secs < -float64(1<<62)/float64(time.Second) {
		return fmt.Errorf("duration %s: want a string such as \"30s\" or a number of seconds", b)
	}
	*d = fileDuration(secs * float64(time.Second))
	return nil
}

// transport is cfg's transport, inferred when it is empty.
func (cfg *ServerConfig) transport() Transport {
	switch {
	case cfg.Transport != "":
		return cfg.Transport
	case cfg.Command != "":
		return TransportStdio
	case cfg.URL != "":
		return TransportHTTP
	}
	return ""
}

func (cfg *ServerConfig) isolation() Isolation {
	if cfg.Isolation == "" {
		return IsolationShared
	}
	return cfg.Isolation
}

func (cfg *ServerConfig) callTimeout() time.Duration {
	switch {
	case cfg.CallTimeout == 0:
		return defaultCallTimeout
	case cfg.CallTimeout < 0:
		return 0
	}
	return cfg.CallTimeout
}

func (cfg *ServerConfig) startTimeout() time.Duration {
	if cfg.StartTimeout <= 0 {
		return defaultStartTimeout
	}
	return cfg.StartTimeout
}

// validate checks what can be checked before references are expanded.
func (cfg *ServerConfig) validate() error {
	if strings.TrimSpace(cfg.Name) == "" {
		return errors.New("a server without a name")
	}
	switch cfg.transport() {
	case TransportStdio:
		if cfg.Command == "" {
			return fmt.Errorf("server %q: a stdio server needs a command", cfg.Name)
		}
		if cfg.URL != "" {
			return fmt.Errorf("server %q: a stdio server has a command, not a url", cfg.Name)
		}
	case TransportSSE, TransportHTTP:
		if cfg.URL == "" {
			return fmt.Errorf("server %q: an %s server needs a url", cfg.Name, cfg.transport())
		}
		if cfg.Command != "" {
			return fmt.Errorf("server %q: an %s server has a url, not a command", cfg.Name, cfg.transport())
		}
	case "":
		return fmt.Errorf("server %q: neither a command nor a url", cfg.Name)
	default:
		return fmt.Errorf("server %q: unknown transport %q (want stdio, sse or http)", cfg.Name, cfg.Transport)
	}
	if cfg.OAuth != nil && cfg.transport() != TransportHTTP {
		return fmt.Errorf("server %q: oauth is for http servers only", cfg.Name)
	}
	if cfg.OAuth != nil && cfg.Isolation == IsolationPerConversation {
		return fmt.Errorf("server %q: an oauth server runs one connection per user, not per conversation", cfg.Name)
	}
	switch cfg.isolation() {
	case IsolationShared, IsolationPerConversation:
	default:
		return fmt.Errorf("server %q: unknown isolation %q (want shared or per_conversation)", cfg.Name, cfg.Isolation)
	}
	return nil
}

// expanded is a ServerConfig with its references expanded, and the secrets
// it holds.
type expanded struct {
	ServerConfig
	secrets []string
}

// minSecret is the length below which a value is not redacted: replacing
// every "1" or "on" in a message would make it unreadable and hide nothing.
const minSecret = 4

// expand returns cfg with its ${NAME} references expanded from lookup, and
// the values to redact.
func expand(cfg ServerConfig, lookup func(string) (string, bool)) (*expanded, error) {
	e := &expanded{ServerConfig: cfg}
	var err error
	ex := func(field, s string) string {
		if err != nil {
			return s
		}
		var out string
		var values []string
		out, values, err = expandRefs(s, lookup)
		if err != nil {
			err = fmt.Errorf("server %q: %s: %w", cfg.Name, field, err)
		}
		e.secrets = append(e.secrets, values...)
		return out
	}
	e.Command = ex("command", cfg.Command)
	e.Args = make([]string, len(cfg.Args))
	for i, a := range cfg.Args {
		e.Args[i] = ex("args", a)
	}
	e.Env = make(map[string]string, len(cfg.Env))
	for k, v := range cfg.Env {
		v = ex("env "+k, v)
		e.Env[k] = v
		if secretName(k) {
			e.secrets = append(e.secrets, v)
		}
	}
	e.Dir = ex("cwd", cfg.Dir)
	e.URL = ex("url", cfg.URL)
	if cfg.OAuth != nil {
		o := *cfg.OAuth
		o.ClientID = ex("oauth client_id", o.ClientID)
		o.ClientSecret = ex("oauth client_secret", o.ClientSecret)
		e.secrets = append(e.secrets, o.ClientSecret)
		e.OAuth = &o
	}
	e.Headers = make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		v = ex("header "+k, v)
		e.Headers[k] = v
		e.secrets = append(e.secrets, v)
		if _, cred, ok := strings.Cut(v, " "); ok { // "Bearer <token>"
			e.secrets = append(e.secrets, strings.TrimSpace(cred))
		}
	}
	if err != nil {
		return nil, err
	}
	if e.URL != "" {
		u, perr := url.Parse(e.URL)
		if perr != nil {
			// url.Parse quotes the URL in its error: keep only the reason.
			var ue *url.Error
			if errors.As(perr, &ue) {
				perr = ue.Err
			}
			return nil, fmt.Errorf("server %q: url: %w", cfg.Name, perr)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("server %q: url: want http or https, not %q", cfg.Name, u.Scheme)
		}
		if p, ok := u.User.Password(); ok {
			e.secrets = append(e.secrets, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	var forms []string
	for _, s := range e.secrets {
		forms = append(forms, secretForms(s)...)
	}
	e.secrets = slices.DeleteFunc(forms, func(s string) bool { return len(s) < minSecret })
	return e, nil
}

// secretName reports whether an environment variable's name says it holds
// a secret: GITHUB_TOKEN, OPENAI_API_KEY, DB_PASSWORD and the like.
func secretName(name string) bool {
	name = strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "KEY", "SECRET", "PASS", "PWD", "AUTH", "CRED", "PRIVATE", "SESSION", "COOKIE", "SIGNATURE"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// expandRefs replaces the ${NAME} and ${NAME:-default} references in s and
// returns the values it put in.
func expandRefs(s string, lookup func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var b strings.Builder
	var values []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), values, nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", nil, errors.New("a ${ without its closing }")
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", nil, fmt.Errorf("${%s}: not a variable name", ref)
		}
		v, ok := lookup(name)
		if !ok || v == "" {
			if !hasDef {
				return "", nil, fmt.Errorf("environment variable %s is not set", name)
			}
			v = def
		}
		values = append(values, v)
		b.WriteString(v)
	}
}

func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
