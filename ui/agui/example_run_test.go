package agui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/agui"
)

// The RunAgentInput an AG-UI client (@ag-ui/client's HttpAgent) posts to
// start a run with the user's message, and the one that answers the
// run's interrupt (an approval) by its id in resume. Each body is printed
// with the answer's status and event types; the approval id, which the
// server makes at random, is sent as the server gave it and printed as
// APPROVAL_ID. With curl:
//
//	curl -N http://127.0.0.1:8090/api/agui -H 'Content-Type: application/json' \
//	  -d '{"threadId":"thread-1","runId":"run-1","state":{},"messages":[{"id":"m1","role":"user","content":"what is the weather in Lima"}],"tools":[],"context":[],"forwardedProps":{}}'
func ExampleHandler_runAgentInput() {
	model := func(req *agenttest.Request) agenttest.Response {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "tool":
			return agenttest.Reply().Text("Done: " + last.Content).Finish("stop")
		case !req.HasTools():
			return agenttest.Reply().Text("Let me see. <need_tool>").Finish("stop")
		}
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	}
	store := &memory.MemStore{}
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "The weather of a city.", func(_ context.Context, in city, _ agent.Progress) (string, error) {
		return "sunny in " + in.City, nil
	})
	tools, err := agent.NewToolRegistry(weather)
	if err != nil {
		log.Fatal(err)
	}
	r, err := runner.New(runner.Config{Store: store, InterruptOnClose: true, Agent: agent.Config{
		BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: agenttest.RespondFunc(model)},
		Model: "demo", Tools: tools,
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	h, err := agui.NewHandler(ui.Config{Runner: r, Authorize: ui.AllowAnyCaller})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// run posts body and prints it (id shown as APPROVAL_ID) and the
	// answer's event types; it returns the interrupt's id.
	run := func(body, id string) string {
		shown := body
		if id != "" {
			shown = strings.ReplaceAll(body, id, "APPROVAL_ID")
		}
		fmt.Println("POST", shown)
		res, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		if err != nil {
			log.Fatal(err)
		}
		var types []string
		interrupt := ""
		for line := range strings.Lines(string(raw)) {
			data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
			if !ok {
				continue
			}
			var e struct {
				Type    string `json:"type"`
				Outcome struct {
					Type       string `json:"type"`
					Interrupts []struct {
						ID     string `json:"id"`
						Reason string `json:"reason"`
					} `json:"interrupts"`
				} `json:"outcome"`
			}
			if json.Unmarshal([]byte(data), &e) != nil {
				continue
			}
			t := e.Type
			if e.Outcome.Type != "" {
				t += "(" + e.Outcome.Type + ")"
			}
			for _, in := range e.Outcome.Interrupts {
				interrupt = in.ID
				t += " interrupt:" + in.Reason
			}
			types = append(types, t)
		}
		fmt.Printf("-> %d %s\n", res.StatusCode, strings.Join(types, " "))
		return interrupt
	}

	user := `{"id":"m1","role":"user","content":"what is the weather in Lima"}`
	id := run(`{"threadId":"thread-1","runId":"run-1","state":{},"messages":[`+user+`],"tools":[],"context":[],"forwardedProps":{}}`, "")
	// The answer: the messages the client holds (the assistant's with the
	// call, whose name and arguments the approval is bound to) and a
	// resume entry for the interrupt.
	run(`{"threadId":"thread-1","runId":"run-2","state":{},"messages":[`+user+
		`,{"id":"a1","role":"assistant","content":"Let me see. ","toolCalls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]}],`+
		`"resume":[{"interruptId":"`+id+`","status":"resolved","payload":{"approved":true}}],"tools":[],"context":[],"forwardedProps":{}}`, id)
	// Output:
	// POST {"threadId":"thread-1","runId":"run-1","state":{},"messages":[{"id":"m1","role":"user","content":"what is the weather in Lima"}],"tools":[],"context":[],"forwardedProps":{}}
	// -> 200 RUN_STARTED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END CUSTOM STEP_FINISHED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED(interrupt) interrupt:tool_approval
	// POST {"threadId":"thread-1","runId":"run-2","state":{},"messages":[{"id":"m1","role":"user","content":"what is the weather in Lima"},{"id":"a1","role":"assistant","content":"Let me see. ","toolCalls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]}],"resume":[{"interruptId":"APPROVAL_ID","status":"resolved","payload":{"approved":true}}],"tools":[],"context":[],"forwardedProps":{}}
	// -> 200 RUN_STARTED STEP_STARTED TOOL_CALL_RESULT CUSTOM STEP_FINISHED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END CUSTOM STEP_FINISHED RUN_FINISHED(success)
}
