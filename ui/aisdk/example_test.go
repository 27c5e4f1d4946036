package aisdk_test

import (
	"bufio"
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
	"github.com/planround/planround/ui/aisdk"
)

// A host mounts the handler where useChat's DefaultChatTransport posts
// (/api/chat), on a runner, which takes the person's decisions. Here a
// scripted model answers, and a request like the one useChat sends for a
// new message gets the UI message stream of the turn.
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

	h, err := aisdk.NewHandler(ui.Config{
		Runner: r,
		// The host's authentication: who asks, and may they act on this
		// chat? ui.AllowAnyCaller is for a single-user tool only.
		Authorize: ui.AllowAnyCaller,
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	mux.Handle("/api/chat/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `{"id":"chat-1","trigger":"submit-message","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hi"}]}]}`
	res, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	fmt.Println(res.Header.Get("X-Vercel-Ai-Ui-Message-Stream"))
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var chunk struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal([]byte(data), &chunk) != nil {
			fmt.Println(data) // [DONE]
			continue
		}
		if chunk.Delta != "" {
			fmt.Printf("%s %q\n", chunk.Type, chunk.Delta)
		} else {
			fmt.Println(chunk.Type)
		}
	}
	// Output:
	// v1
	// start
	// start-step
	// text-start
	// text-delta "Hello! "
	// text-end
	// data-planround-round
	// finish-step
	// start-step
	// text-start
	// text-delta "How can I help?"
	// text-end
	// data-planround-round
	// finish-step
	// finish
	// [DONE]
}
