// Command aisdk is a small chat page built on the AI SDK's own client: the
// page drives planround's ui/aisdk handler with the ai package's
// AbstractChat and DefaultChatTransport, from a pinned, vendored browser
// build (web/ai-client.js: no CDN, no build step to run it). It shows the
// turn as the handler streams it: text, tool parts, an Approve / Deny pair
// for a call that needs approval, the cards of show_card, the forms of
// ask_user_question, and a Stop button.
//
//	go run ./examples/aisdk                  # http://127.0.0.1:8090
//	go run ./examples/aisdk -addr 127.0.0.1:9000
//	go run ./examples/aisdk -db /tmp/chats.db    # or -memory: keep nothing
//	OPENAI_API_KEY=... go run ./examples/aisdk -model gpt-4o-mini
//	go run ./examples/aisdk -base-url http://127.0.0.1:11434/v1 -model qwen3
//
// With neither OPENAI_API_KEY nor -base-url it runs on the built-in demo
// model (package demo), which works without a network: ask it "what is the
// weather in Lima", "ask me a few questions" or "show me a card about
// Paris". The tools are get_weather (the demo's fake weather, which needs
// approval), ask_user_question and show_card (package interact).
//
// The page is web/index.html and web/app.js, plain ES modules, embedded in
// the binary. web/build.sh regenerates web/ai-client.js from
// ui/testdata/npm (the ai package pinned there) with its pinned esbuild.
//
// The page names its chat in its address (/#<id>): a reload, or the same
// address opened later, loads the chat's messages from the handler (GET
// /api/chat/<id>/messages) and follows a turn still in progress (the ai
// client's resumeStream), a pending approval or form included, answerable
// as before. "New chat" starts another.
//
// # Who can use it
//
// Each browser gets a random owner cookie (HttpOnly, SameSite=Strict,
// kept for a year) when it loads the page; the page names its chats with
// ids of its own, and the first request that names a chat id claims it for
// the cookie's owner: another browser's requests on it are refused (403).
// The claims are kept in the store beside the chats (its memory.KV), so a
// chat stays its browser's after a restart; they, and the decisions'
// audit, name a browser by a hash of its cookie, never by the cookie. A browser claims at most
// maxChatsPerOwner chats, so that one browser naming ids in a loop cannot
// take the room of the others; the server keeps at most maxChats claims in
// all (a cookie is free to get: a host that serves people it does not know
// authenticates them). The server listens on 127.0.0.1 and refuses an
// address that is not a loopback one unless it is given -allow-remote:
// anyone who reaches the page may run its tools. It answers only requests
// whose Host is localhost or an IP address (421 otherwise): a page of
// another site whose name resolves to 127.0.0.1 (DNS rebinding) would
// otherwise be same-origin with it, get a cookie of its own and run the
// tools.
//
// # What it keeps
//
// The chats, the approvals and forms they wait for, the decisions taken,
// and who owns each chat are kept in SQLite: aisdk.db in the user's data
// folder ($XDG_DATA_HOME/planround-aisdk, else
// ~/.local/share/planround-aisdk, the application support folder on
// macOS; created 0700, printed at start), or the file -db names. A turn
// that waits for a person outlives a restart: SIGINT or SIGTERM suspends
// it, and the approval, given after the restart, runs the tool once and
// the turn goes on. Leaving or reloading the page does not stop a turn
// (ui.Config.KeepRunningOnDisconnect); Stop does. -memory keeps
// nothing: the chats end with the process.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/aisdk"
)

// web holds the page: index.html, app.js, style.css and the vendored
// ai-client.js (with the entry and the script it is built from).
//
//go:embed web
var web embed.FS

// ownerCookie names the cookie that says which browser is asking.
const ownerCookie = "aisdk_owner"

// maxChats bounds the chat ids the server keeps owners for, in all;
// maxChatsPerOwner bounds those one browser (one owner cookie) claims.
const (
	maxChats         = 100_000
	maxChatsPerOwner = 256
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("aisdk", flag.ContinueOnError)
	fl.SetOutput(stderr)
	addr := fl.String("addr", "127.0.0.1:8090", "`address` to listen on")
	allowRemote := fl.Bool("allow-remote", false, "allow an -addr that is not a loopback address (anyone who reaches it may run the tools)")
	model := fl.String("model", envOr("OPENAI_MODEL", "gpt-4o-mini"), "`model` of an OpenAI-compatible API (default $OPENAI_MODEL, else gpt-4o-mini), with OPENAI_API_KEY or -base-url")
	baseURL := fl.String("base-url", os.Getenv("OPENAI_BASE_URL"), "base `URL` of an OpenAI-compatible API (default $OPENAI_BASE_URL, else OpenAI's)")
	db := fl.String("db", "", "SQLite `file` that keeps the chats, their waiting approvals and forms, and who owns them (default: aisdk.db in the user's data folder)")
	inMemory := fl.Bool("memory", false, "keep nothing: the chats end with the process")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "aisdk: unexpected arguments %q\n", fl.Args())
		return 2
	}
	if err := checkExposure(*addr, *allowRemote); err != nil {
		fmt.Fprintf(stderr, "aisdk: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := config{Logger: logger}
	if key := os.Getenv("OPENAI_API_KEY"); key == "" && *baseURL == "" {
		// The demo model answers in process: no network, no listening
		// port.
		cfg.Agent = agent.Config{BaseURL: demo.BaseURL, HTTPClient: demo.Model{Delay: demo.DefaultDelay}.Client(), Model: demo.ModelName}
		fmt.Fprintln(stderr, "aisdk: no model configured (OPENAI_API_KEY, -base-url): running on the built-in demo model")
	} else {
		cfg.Agent = agent.Config{BaseURL: *baseURL, APIKey: key, Model: *model}
	}

	if *db == "" && !*inMemory {
		path, err := sqlitestore.UserDataPath("planround-aisdk", "aisdk.db")
		if err != nil {
			fmt.Fprintf(stderr, "aisdk: no folder for the chats (%v): pass -db FILE, or -memory to keep nothing\n", err)
			return 1
		}
		*db = path
		fmt.Fprintf(stderr, "aisdk: keeping the chats in %s (-db FILE picks another file, -memory keeps nothing)\n", *db)
	}
	if *db != "" {
		st, err := sqlitestore.Open(ctx, *db)
		if err != nil {
			fmt.Fprintf(stderr, "aisdk: %v\n", err)
			return 1
		}
		defer st.Close()
		cfg.Store = st
	}

	srv, err := newServer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "aisdk: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "aisdk: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "aisdk: listening on http://%s/\n", ln.Addr())

	status := 0
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "aisdk: shutting down")
	case err := <-served:
		fmt.Fprintf(stderr, "aisdk: %v\n", err)
		status = 1
	}
	// The runs first: they end interrupted, and their streams with them.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if status == 0 {
		<-served // http.ErrServerClosed
	}
	return status
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// checkExposure refuses to serve others by accident: an address that is
// not a loopback one (":8090", "0.0.0.0:8090", a LAN address) needs
// allowRemote.
func checkExposure(addr string, allowRemote bool) error {
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return err
	}
	if (tcp.IP != nil && tcp.IP.IsLoopback()) || allowRemote {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address: anyone who reaches it could run the tools; pass -allow-remote to serve it anyway", addr)
}

// config is what newServer builds a server from.
type config struct {
	// Agent is the agent's configuration: its model (BaseURL, APIKey,
	// Model, HTTPClient) and any setting. newServer sets its Tools, Store
	// and Approver, and a SystemPrompt when it has none.
	Agent agent.Config
	// Weather is the tool that needs approval: demo.GetWeather when nil.
	Weather agent.Tool
	// Store keeps the chats, their approvals and forms, and in its
	// memory.KV who owns each chat; nil is a memory.MemStore that ends
	// with the process. The caller closes it, after the server.
	Store Store
	// Logger receives what goes wrong outside a request; nil discards it.
	Logger *slog.Logger
}

// server is the example: the page, the aisdk handler, and the runner on
// one store.
type server struct {
	mux     *http.ServeMux
	store   Store
	durable bool // the store keeps turns that wait across a restart
	runner  *runner.Runner
}

// Store is what the server keeps its state in: the sessions, and the
// owners of the chats in the KV, the approvals and forms (memory.MemStore, sqlitestore.Store and
// pgstore.Store are all three).
type Store interface {
	memory.Store
	memory.ApprovalStore
	memory.KV
}

// newServer builds the server; Close ends it.
func newServer(cfg config) (*server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Weather == nil {
		cfg.Weather = demo.GetWeather()
	}
	if cfg.Store == nil {
		cfg.Store = &memory.MemStore{}
	}
	// One store for the runner, the approvals and the forms alike: with
	// SQLite (or PostgreSQL) the turns that wait for a person outlive a
	// restart.
	s := &server{store: cfg.Store}
	_, s.durable = cfg.Store.(*memory.MemStore)
	s.durable = !s.durable
	var err error
	s.runner, err = s.newRunner(cfg)
	if err != nil {
		return nil, err
	}
	chat, err := aisdk.NewHandler(ui.Config{
		Runner:    s.runner,
		Authorize: s.authorize, Logger: cfg.Logger,
		// A reload of the page follows the turn again (GET
		// /api/chat/{id}/messages, then the reconnect): leaving the page
		// does not stop it; the Stop button does.
		KeepRunningOnDisconnect: true,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	page, err := fs.Sub(web, "web")
	if err != nil {
		s.Close()
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("/api/chat", chat)
	s.mux.Handle("/api/chat/", chat)
	files := http.FileServerFS(page)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(ownerCookie); err != nil || c.Value == "" {
			http.SetCookie(w, &http.Cookie{
				Name: ownerCookie, Value: randomID(), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode,
				// A browser restarted still owns its chats.
				MaxAge: ownerCookieAge,
			})
		}
		files.ServeHTTP(w, r)
	})
	for _, name := range []string{"app.js", "style.css", "ai-client.js", "favicon.svg"} {
		s.mux.Handle("GET /"+name, files)
	}
	return s, nil
}

const systemPrompt = `You are a helpful assistant in a small demo chat. Use get_weather for the weather of a city, ask_user_question when you need the user to choose or tell you something, and show_card to show a short card. Be brief.`

// newRunner builds the agent and its runner.
func (s *server) newRunner(cfg config) (*runner.Runner, error) {
	tools, err := agent.NewToolRegistry(cfg.Weather, interact.AskUserQuestion(), interact.ShowCard())
	if err != nil {
		return nil, err
	}
	ac := cfg.Agent
	ac.Tools = tools
	if ac.SystemPrompt == "" {
		ac.SystemPrompt = systemPrompt
	}
	if ac.Logger == nil {
		ac.Logger = cfg.Logger
	}
	// A durable store keeps what waits for a person: Close suspends it,
	// and the next process takes its decision. A MemStore ends with the
	// process: Close interrupts what waits instead of suspending it for a
	// restart that would not see it.
	return runner.New(runner.Config{Store: s.store, Agent: ac, InterruptOnClose: !s.durable, Logger: cfg.Logger})
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !localHost(r.Host) {
		http.Error(w, "unexpected Host "+strconv.Quote(r.Host)+": use the address the server printed", http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// localHost reports whether host, a request's Host, names this machine
// the way the server's own address does: localhost or an IP address (so
// -addr may bind another interface), with or without a port. Any other
// name may be a DNS-rebinding page's (evil.example resolving to
// 127.0.0.1), which the browser would hold same-origin with the chat.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}

// Close interrupts the runs and ends the runner.
func (s *server) Close() {
	if s.runner != nil {
		s.runner.Close()
	}
}

// errNotOwner is the answer to a browser that names another's chat.
var errNotOwner = errors.New("this chat belongs to another browser")

// The KV namespaces of the chats' owners: ownersNS maps a chat id to its
// owner, claimsNS an owner (and allClaims, all of them) to how many chat
// ids it claimed, in decimal.
const (
	ownersNS  = "aisdk-owners"
	claimsNS  = "aisdk-claims"
	allClaims = "*"
)

// ownerCookieAge is the owner cookie's Max-Age: a year.
const ownerCookieAge = 365 * 24 * 60 * 60

// authorize is the handler's Authorize: the caller is the browser of the
// owner cookie, which may act on the chats it named first. A chat id no one
// named yet is claimed by the caller, unless it has maxChatsPerOwner
// claims already or the server maxChats. The claims are kept in the
// store's KV, so that they outlive a restart of a durable store.
func (s *server) authorize(r *http.Request, chatID string) (string, error) {
	c, err := r.Cookie(ownerCookie)
	if err != nil || c.Value == "" {
		return "", fmt.Errorf("%w: no owner cookie (load the page first)", ui.ErrUnauthenticated)
	}
	if !validChatID(c.Value) {
		return "", fmt.Errorf("%w: a malformed owner cookie (load the page again)", ui.ErrUnauthenticated)
	}
	if !validChatID(chatID) {
		return "", errors.New("a chat id is 1 to 64 letters, digits, '-' or '_'")
	}
	// The owner is named by a hash of its cookie: the store's claims and
	// the decisions' audit (Decision.By) never hold the cookie itself, so
	// that whoever reads them cannot act as that browser.
	sum := sha256.Sum256([]byte(c.Value))
	owner := "browser:" + hex.EncodeToString(sum[:16])
	ctx := r.Context()
	switch had, err := s.owner(ctx, chatID); {
	case err != nil:
		return "", err
	case had == owner:
		return owner, nil
	case had != "":
		return "", errNotOwner
	}
	// No owner yet: count the claim (the owner's, then all), then claim.
	if err := s.count(ctx, owner, maxChatsPerOwner, +1); err != nil {
		return "", err
	}
	if err := s.count(ctx, allClaims, maxChats, +1); err != nil {
		s.uncount(ctx, owner)
		return "", err
	}
	ok, err := s.store.SwapValue(ctx, ownersNS, chatID, nil, []byte(owner))
	if err == nil && !ok {
		// Another request claimed it meanwhile: this claim did not count.
		err = errNotOwner
		if had, _ := s.owner(ctx, chatID); had == owner {
			err = nil
		}
	}
	if err != nil || !ok {
		s.uncount(ctx, owner)
		s.uncount(ctx, allClaims)
	}
	if err != nil {
		return "", err
	}
	return owner, nil
}

// owner returns the owner of chatID, or "" when no one claimed it.
func (s *server) owner(ctx context.Context, chatID string) (string, error) {
	v, err := s.store.GetValue(ctx, ownersNS, chatID)
	if errors.Is(err, memory.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the chat's owner: %w", err)
	}
	return string(v), nil
}

// count adds delta to the claims of key (an owner, or allClaims), unless
// that would make them more than max: then it says so. Concurrent counts
// are serialised by the KV's SwapValue, tried again a bounded number of
// times.
func (s *server) count(ctx context.Context, key string, max, delta int) error {
	for range 100 {
		old, err := s.store.GetValue(ctx, claimsNS, key)
		if errors.Is(err, memory.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("reading the claims: %w", err)
		}
		n := 0
		if old != nil {
			if n, err = strconv.Atoi(string(old)); err != nil {
				return fmt.Errorf("the claims of %s: %w", key, err)
			}
		}
		switch {
		case delta > 0 && n+delta > max && key == allClaims:
			return errors.New("too many chats on this server")
		case delta > 0 && n+delta > max:
			return fmt.Errorf("this browser has %d chats, the most it may have", max)
		case n+delta < 0:
			return nil
		}
		ok, err := s.store.SwapValue(ctx, claimsNS, key, old, []byte(strconv.Itoa(n+delta)))
		if err != nil {
			return fmt.Errorf("counting the claims: %w", err)
		}
		if ok {
			return nil
		}
	}
	return errors.New("counting the claims: too much contention, try again")
}

// uncount takes back a claim counted by count.
func (s *server) uncount(ctx context.Context, key string) {
	_ = s.count(context.WithoutCancel(ctx), key, 0, -1)
}

// validChatID reports whether id is a chat id the page could make.
func validChatID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// randomID returns 128 random bits in hex.
func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
