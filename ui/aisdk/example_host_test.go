package aisdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/aisdk"
)

// newService and owner are the durable host of the README ("A durable
// service"), word for word: the root package's TestREADMEHostIsTheExample
// compares them.

// newService is a whole durable host: the store, named once; the runner,
// which owns the approvals, forms and stops of its sessions on that store;
// a policy that lets read-only tools run without a person; and the AI SDK
// handler, which asks owner who is asking.
func newService(ctx context.Context, dbFile string, model agent.Config) (http.Handler, func(), error) {
	st, err := sqlitestore.Open(ctx, dbFile) // several replicas: pgstore.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	r, err := runner.New(runner.Config{
		Store:    st,
		Agent:    model,
		Policies: []approval.Policy{approval.ReadOnlyHints()}, // other calls wait for a person
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	chat, err := aisdk.NewHandler(ui.Config{Runner: r, Authorize: owner})
	if err != nil {
		r.Close()
		st.Close()
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/chat", chat)  // useChat's DefaultChatTransport posts here
	mux.Handle("/api/chat/", chat) // reconnect and stop
	return mux, func() { r.Close(); st.Close() }, nil
}

// owner says who is asking and whether they may act on the session: a
// bearer token names the user, whose sessions are named "user/...".
func owner(req *http.Request, session string) (string, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	user := users[token]
	if !ok || token == "" || user == "" {
		return "", ui.ErrUnauthenticated // 401
	}
	if !strings.HasPrefix(session, user+"/") {
		return "", errors.New("not your conversation") // 403
	}
	return user, nil
}

// users stands in for the host's accounts.
var users = map[string]string{"alice-token": "alice"}

// Example_durableHost runs the README's durable host on a scripted model:
// alice asks for the weather and the call waits for her approval; a caller
// without a token is refused; the service stops (a deploy) and starts again
// on the same file, where alice approves: the turn goes on from the store,
// and the tool runs once.
func Example_durableHost() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "planround-host-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	runs := 0
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "The weather of a city.", func(_ context.Context, in city, _ agent.Progress) (string, error) {
		runs++
		return "sunny in " + in.City, nil
	})
	tools, err := agent.NewToolRegistry(weather)
	if err != nil {
		log.Fatal(err)
	}
	model := agent.Config{BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: agenttest.RespondFunc(script)},
		Model: "demo", Tools: tools}
	post := func(srv *httptest.Server, token, body string) string {
		req, _ := http.NewRequest("POST", srv.URL+"/api/chat", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Println("status", res.StatusCode)
		return string(b)
	}
	ask := `{"id":"alice/1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"weather in Lima?"}]}],"trigger":"submit-message"}`

	h, stop, err := newService(ctx, filepath.Join(dir, "chat.db"), model)
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	post(srv, "", ask) // nobody
	stream := post(srv, "alice-token", ask)
	_, rest, _ := strings.Cut(stream, `"type":"tool-approval-request"`)
	_, rest, _ = strings.Cut(rest, `"approvalId":"`)
	approvalID, _, _ := strings.Cut(rest, `"`)
	fmt.Println("waiting for approval:", approvalID != "")
	srv.Close()
	stop() // a deploy: the turn waits in chat.db

	h, stop, err = newService(ctx, filepath.Join(dir, "chat.db"), model)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	srv = httptest.NewServer(h)
	defer srv.Close()
	stream = post(srv, "alice-token", `{"id":"alice/1","messages":[`+
		`{"id":"m1","role":"user","parts":[{"type":"text","text":"weather in Lima?"}]},`+
		`{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1",`+
		`"state":"approval-responded","input":{"city":"Lima"},"approval":{"id":"`+approvalID+`","approved":true}}]}],`+
		`"trigger":"submit-message","messageId":"turn-1"}`)
	fmt.Println("answer:", strings.Contains(stream, "Done: sunny in Lima"))
	fmt.Println("tool runs:", runs)
	// Output:
	// status 401
	// status 200
	// waiting for approval: true
	// status 200
	// answer: true
	// tool runs: 1
}
