package jsonapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/jsonapi"
)

// A host mounts the handler under /api, on a runner. A client follows the
// session's events, sends a message, and reads the turn from the stream.
func ExampleNewHandler() {
	model := agenttest.NewServer()
	defer model.Close()
	model.Enqueue(agenttest.Reply().Text("Hello! <no_tool>").Finish("stop"))
	model.Enqueue(agenttest.Reply().Text("How can I help?").Finish("stop"))

	r, err := runner.New(runner.Config{
		Store:            &memory.MemStore{},
		Agent:            agent.Config{BaseURL: model.URL(), HTTPClient: model.Client(), Model: "demo"},
		InterruptOnClose: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	h, err := jsonapi.NewHandler(ui.Config{
		Runner: r,
		// The host's authentication: who asks, and may they act on this
		// session? ui.AllowAnyCaller is for a single-user tool only.
		Authorize: ui.AllowAnyCaller,
	}, jsonapi.Options{Hello: map[string]string{"model": "demo"}})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?session_id=s1", nil)
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer events.Body.Close()
	sc := bufio.NewScanner(events.Body)
	sc.Scan() // event: hello
	sc.Scan()
	fmt.Println("hello", strings.TrimPrefix(sc.Text(), "data: "))

	res, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(`{"session_id":"s1","message":"Hi"}`))
	if err != nil {
		log.Fatal(err)
	}
	res.Body.Close()
	fmt.Println("POST /api/chat:", res.Status)

	var name, text string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "":
			var c agent.Chunk
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c) == nil && c.Kind == agent.KindText {
				text += c.Text
			}
		case strings.HasPrefix(line, "data: "):
			fmt.Println(name, strings.TrimPrefix(line, "data: "))
		case line == "":
			name = ""
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"status"`) {
			break
		}
	}
	fmt.Println("text:", text)
	// Output:
	// hello {"busy":false,"seq":0,"replay":false,"model":"demo"}
	// POST /api/chat: 202 Accepted
	// run_started {"message":"Hi","history":0}
	// run_done {"status":"finished","turn":1}
	// text: Hello! How can I help?
}
