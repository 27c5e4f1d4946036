package aisdk_test

import (
	"bytes"
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
	"github.com/planround/planround/interact"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
	"github.com/planround/planround/ui"
	"github.com/planround/planround/ui/aisdk"
)

// The examples below send the request bodies of the ai package's
// DefaultChatTransport (useChat) to a real handler, and print each body and
// a summary of its answer: the status and the stream's chunk types. Ids
// the server makes at random (an approval's, a form's) are sent as the
// server gave them and printed as APPROVAL_ID and FORM_ID.

// script is the examples' model: "Hi" is answered in words; "weather"
// calls get_weather, which needs approval; "ask" calls ask_user_question;
// after a tool, "Done: " and its result.
func script(req *agenttest.Request) agenttest.Response {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	user := ""
	for _, m := range msgs {
		if m.Role == "user" && m.Content != "[continue]" {
			user = m.Content
		}
	}
	switch {
	case last.Role == "tool":
		return agenttest.Reply().Text("Done: " + last.Content).Finish("stop")
	case !req.HasTools() && last.Content == "[continue]":
		return agenttest.Reply().Text("How can I help?").Finish("stop")
	case !req.HasTools() && user == "Hi":
		return agenttest.Reply().Text("Hello! <no_tool>").Finish("stop")
	case !req.HasTools():
		return agenttest.Reply().Text("Let me see. <need_tool>").Finish("stop")
	case strings.Contains(user, "weather"):
		return agenttest.Reply().Call(0, "call_1", "get_weather", `{"city":"Lima"}`).Finish("tool_calls")
	case strings.Contains(user, "ask"):
		return agenttest.Reply().Call(0, "call_2", "ask_user_question",
			`{"questions":[{"id":"city","question":"Which city?","kind":"single","options":["Lima","Quito"]}]}`).Finish("tool_calls")
	}
	return agenttest.Reply().Text("I do not know.").Finish("stop")
}

// exampleServer is the handler at /api/chat on 127.0.0.1, on a runner
// whose agent answers with script.
type exampleServer struct {
	url   string
	close func()
}

func startExample() *exampleServer {
	store := &memory.MemStore{}
	type city struct {
		City string `json:"city"`
	}
	weather := agent.NewTool("get_weather", "The weather of a city.", func(_ context.Context, in city, _ agent.Progress) (string, error) {
		return "sunny in " + in.City, nil
	})
	tools, err := agent.NewToolRegistry(weather, interact.AskUserQuestion())
	if err != nil {
		log.Fatal(err)
	}
	r, err := runner.New(runner.Config{Store: store, InterruptOnClose: true, Agent: agent.Config{
		BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: agenttest.RespondFunc(script)},
		Model: "demo", Tools: tools,
	}})
	if err != nil {
		log.Fatal(err)
	}
	h, err := aisdk.NewHandler(ui.Config{Runner: r, Authorize: ui.AllowAnyCaller})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/chat", h)
	mux.Handle("/api/chat/", h)
	srv := httptest.NewServer(mux)
	return &exampleServer{url: srv.URL, close: func() {
		r.Close()
		srv.Close()
	}}
}

// send sends body (nil: none) to path with method, prints the body (with
// the given ids shown by their names) and a summary of the answer, and
// returns the answer's chunks or JSON.
func (s *exampleServer) send(method, path, body string, names map[string]string) []map[string]any {
	shown := body
	for id, name := range names {
		shown = strings.ReplaceAll(shown, id, name)
	}
	if body != "" {
		fmt.Println(method, path, shown)
	} else {
		fmt.Println(method, path)
	}
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		log.Fatal(err)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		out := bytes.TrimSpace(raw)
		for id, name := range names {
			out = bytes.ReplaceAll(out, []byte(id), []byte(name))
		}
		if len(out) > 2 && out[0] == '[' {
			var b bytes.Buffer
			if json.Indent(&b, out, "", "  ") == nil {
				out = b.Bytes()
			}
		}
		fmt.Println(strings.TrimSpace(fmt.Sprintf("-> %d %s", res.StatusCode, out)))
		return nil
	}
	var chunks []map[string]any
	var types []string
	for line := range strings.Lines(string(raw)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var c map[string]any
		if json.Unmarshal([]byte(data), &c) != nil {
			types = append(types, data) // [DONE]
			continue
		}
		chunks = append(chunks, c)
		types = append(types, c["type"].(string))
	}
	fmt.Printf("-> %d stream: %s\n", res.StatusCode, strings.Join(types, " "))
	return chunks
}

// field returns the string field key of the first chunk of type typ.
func field(chunks []map[string]any, typ, key string) string {
	for _, c := range chunks {
		if c["type"] == typ {
			if s, ok := c[key].(string); ok {
				return s
			}
		}
	}
	return ""
}

// A user's message: the chat id, its messages (the handler reads the last
// one, the user's text), and the trigger. The answer is the turn, as one
// new assistant message.
//
//	curl -N http://127.0.0.1:8090/api/chat -H 'Content-Type: application/json' \
//	  -d '{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hi"}]}],"trigger":"submit-message"}'
func Example_userMessage() {
	s := startExample()
	defer s.close()
	s.send("POST", "/api/chat", `{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hi"}]}],"trigger":"submit-message"}`, nil)
	// Output:
	// POST /api/chat {"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hi"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step text-start text-delta text-end data-planround-round finish-step finish [DONE]
}

// An approval response: the turn stopped at an approval (its response
// finished with tool-approval-request); the client sends its messages
// again, the last one the assistant's with the tool part answered
// (addToolApprovalResponse: state "approval-responded" and approval
// {id, approved, reason}), and messageId naming that message. The input
// is the call's as the part shows it: the approval is bound to the call
// id, the tool and the input. The answer continues the same message.
//
//	curl -N http://127.0.0.1:8090/api/chat -H 'Content-Type: application/json' \
//	  -d '{"id":"chat-2","messages":[{"id":"m1","role":"user","parts":[...]},{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1","state":"approval-responded","input":{"city":"Lima"},"approval":{"id":"APPROVAL_ID","approved":true}}]}],"trigger":"submit-message","messageId":"turn-1"}'
func Example_approvalResponse() {
	s := startExample()
	defer s.close()
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}`
	chunks := s.send("POST", "/api/chat", `{"id":"chat-2","messages":[`+user+`],"trigger":"submit-message"}`, nil)
	id := field(chunks, "tool-approval-request", "approvalId")
	s.send("POST", "/api/chat", `{"id":"chat-2","messages":[`+user+`,{"id":"turn-1","role":"assistant","parts":[`+
		`{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1","state":"approval-responded","input":{"city":"Lima"},`+
		`"approval":{"id":"`+id+`","approved":true}}]}],"trigger":"submit-message","messageId":"turn-1"}`,
		map[string]string{id: "APPROVAL_ID"})
	// Output:
	// POST /api/chat {"id":"chat-2","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available tool-approval-request finish-step finish [DONE]
	// POST /api/chat {"id":"chat-2","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]},{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1","state":"approval-responded","input":{"city":"Lima"},"approval":{"id":"APPROVAL_ID","approved":true}}]}],"trigger":"submit-message","messageId":"turn-1"}
	// -> 200 stream: start tool-output-available data-planround-round finish-step start-step text-start text-delta text-end data-planround-round finish-step finish [DONE]
}

// A form's answer (ask_user_question): the turn stopped at a
// data-planround-form part; the client sends its messages again with the
// body field planround.form, the form's id and the answers by question id
// (chat.sendMessage(undefined, {body: {planround: {form}}})). An MCP
// server's request for input is answered with {"id", "action", "content"}
// instead.
//
//	curl -N http://127.0.0.1:8090/api/chat -H 'Content-Type: application/json' \
//	  -d '{"planround":{"form":{"id":"FORM_ID","answers":{"city":["Quito"]}}},"id":"chat-3","messages":[...],"trigger":"submit-message"}'
func Example_formAnswer() {
	s := startExample()
	defer s.close()
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"ask me which city"}]}`
	chunks := s.send("POST", "/api/chat", `{"id":"chat-3","messages":[`+user+`],"trigger":"submit-message"}`, nil)
	var formID string
	for _, c := range chunks {
		if c["type"] == "data-planround-form" {
			formID, _ = c["id"].(string)
		}
	}
	s.send("POST", "/api/chat", `{"planround":{"form":{"id":"`+formID+`","answers":{"city":["Quito"]}}},"id":"chat-3","messages":[`+user+
		`,{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"ask_user_question","toolCallId":"call_2","state":"input-available","input":{}}]}],"trigger":"submit-message"}`, map[string]string{formID: "FORM_ID"})
	// Output:
	// POST /api/chat {"id":"chat-3","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"ask me which city"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available data-planround-form finish-step finish [DONE]
	// POST /api/chat {"planround":{"form":{"id":"FORM_ID","answers":{"city":["Quito"]}}},"id":"chat-3","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"ask me which city"}]},{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"ask_user_question","toolCallId":"call_2","state":"input-available","input":{}}]}],"trigger":"submit-message"}
	// -> 200 stream: start tool-output-available data-planround-round finish-step start-step text-start text-delta text-end data-planround-round finish-step finish [DONE]
}

// Stop: a POST without a body to {api}/{id}/stop interrupts the chat's
// turn wherever it is, also one that waits for a person, and cancels its
// approvals and forms; it answers once the turn has stopped.
//
//	curl -X POST http://127.0.0.1:8090/api/chat/chat-4/stop
func Example_stop() {
	s := startExample()
	defer s.close()
	s.send("POST", "/api/chat", `{"id":"chat-4","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}`, nil)
	s.send("POST", "/api/chat/chat-4/stop", "", nil)
	s.send("POST", "/api/chat/chat-4/stop", "", nil)
	// Output:
	// POST /api/chat {"id":"chat-4","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available tool-approval-request finish-step finish [DONE]
	// POST /api/chat/chat-4/stop
	// -> 200 {"success":true,"was_active":true}
	// POST /api/chat/chat-4/stop
	// -> 200 {"success":true,"was_active":false}
}

// Reconnect (useChat's resume, resumeStream): a GET of {api}/{id}/stream
// answers the turn in progress from its start, here one that waits for an
// approval, or 204 when none is.
//
//	curl -N http://127.0.0.1:8090/api/chat/chat-5/stream
func Example_reconnect() {
	s := startExample()
	defer s.close()
	s.send("GET", "/api/chat/chat-5/stream", "", nil)
	s.send("POST", "/api/chat", `{"id":"chat-5","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}`, nil)
	s.send("GET", "/api/chat/chat-5/stream", "", nil)
	// Output:
	// GET /api/chat/chat-5/stream
	// -> 204
	// POST /api/chat {"id":"chat-5","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available tool-approval-request finish-step finish [DONE]
	// GET /api/chat/chat-5/stream
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available tool-approval-request finish-step finish [DONE]
}

// History: a GET of {api}/{id}/messages answers the chat's messages as
// the ai client keeps them, for a page that loads the chat again (give
// them to useChat as messages, then call resumeStream). A turn that ended
// is one assistant message; a call shows its parsed input, and the
// arguments as the model wrote them in toolMetadata.planround.
//
//	curl http://127.0.0.1:8090/api/chat/chat-6/messages
func Example_history() {
	s := startExample()
	defer s.close()
	s.send("GET", "/api/chat/chat-6/messages", "", nil)
	user := `{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}`
	chunks := s.send("POST", "/api/chat", `{"id":"chat-6","messages":[`+user+`],"trigger":"submit-message"}`, nil)
	id := field(chunks, "tool-approval-request", "approvalId")
	s.send("POST", "/api/chat", `{"id":"chat-6","messages":[`+user+`,{"id":"turn-1","role":"assistant","parts":[`+
		`{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1","state":"approval-responded","input":{"city":"Lima"},`+
		`"approval":{"id":"`+id+`","approved":true}}]}],"trigger":"submit-message","messageId":"turn-1"}`,
		map[string]string{id: "APPROVAL_ID"})
	s.send("GET", "/api/chat/chat-6/messages", "", nil)
	// Output:
	// GET /api/chat/chat-6/messages
	// -> 200 []
	// POST /api/chat {"id":"chat-6","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]}],"trigger":"submit-message"}
	// -> 200 stream: start start-step text-start text-delta text-end data-planround-round finish-step start-step tool-input-start tool-input-available tool-approval-request finish-step finish [DONE]
	// POST /api/chat {"id":"chat-6","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is the weather in Lima"}]},{"id":"turn-1","role":"assistant","parts":[{"type":"dynamic-tool","toolName":"get_weather","toolCallId":"call_1","state":"approval-responded","input":{"city":"Lima"},"approval":{"id":"APPROVAL_ID","approved":true}}]}],"trigger":"submit-message","messageId":"turn-1"}
	// -> 200 stream: start tool-output-available data-planround-round finish-step start-step text-start text-delta text-end data-planround-round finish-step finish [DONE]
	// GET /api/chat/chat-6/messages
	// -> 200 [
	//   {
	//     "id": "msg-1",
	//     "role": "user",
	//     "parts": [
	//       {
	//         "type": "text",
	//         "text": "what is the weather in Lima"
	//       }
	//     ]
	//   },
	//   {
	//     "id": "msg-2",
	//     "role": "assistant",
	//     "parts": [
	//       {
	//         "type": "text",
	//         "text": "Let me see. ",
	//         "state": "done"
	//       },
	//       {
	//         "type": "dynamic-tool",
	//         "state": "output-available",
	//         "toolCallId": "call_1",
	//         "toolName": "get_weather",
	//         "providerExecuted": true,
	//         "input": {
	//           "city": "Lima"
	//         },
	//         "output": "sunny in Lima",
	//         "toolMetadata": {
	//           "planround": {
	//             "arguments_text": "{\"city\":\"Lima\"}"
	//           }
	//         }
	//       },
	//       {
	//         "type": "text",
	//         "text": "Done: sunny in Lima",
	//         "state": "done"
	//       }
	//     ]
	//   }
	// ]
}
