package agenttest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/planround/planround/agent/agenttest"
)

// TestEnforce: a request that breaks an enforced check is recorded and
// answered 400 with a message saying what is wrong, and takes no response
// from the script; the same request passes when the check is not enforced.
func TestEnforce(t *testing.T) {
	msgs := func(m ...string) string {
		return `{"model":"m","stream":true,"messages":[` + strings.Join(m, ",") + `]}`
	}
	const (
		sys  = `{"role":"system","content":"s"}`
		usr  = `{"role":"user","content":"u"}`
		asst = `{"role":"assistant","content":"a"}`
	)
	call := func(args string) string {
		b, _ := json.Marshal(args)
		return `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":` + string(b) + `}}]}`
	}
	const tool = `{"role":"tool","tool_call_id":"c1","content":"r"}`
	tests := []struct {
		name  string
		check agenttest.Check
		body  string
		says  string // part of the error message; "" means accepted
	}{
		{"object arguments", agenttest.CheckArguments, msgs(sys, usr, call(`{"a":1}`), tool), ""},
		{"cut arguments", agenttest.CheckArguments, msgs(usr, call(`{"city": "Par`), tool), "messages[1]: tool call \"c1\": arguments are not a JSON object"},
		{"array arguments", agenttest.CheckArguments, msgs(usr, call(`[1]`), tool), "not a JSON object"},
		{"empty arguments", agenttest.CheckArguments, msgs(usr, call(``), tool), "not a JSON object"},
		{"string arguments", agenttest.CheckArguments, msgs(usr, call(`"x"`), tool, asst), "not a JSON object"},
		{"assistant with content", agenttest.CheckEmptyAssistant, msgs(usr, asst, usr), ""},
		{"assistant with calls only", agenttest.CheckEmptyAssistant, msgs(usr, call(`{}`), tool), ""},
		{"empty assistant", agenttest.CheckEmptyAssistant, msgs(usr, `{"role":"assistant","content":""}`, usr), "messages[1]: Assistant message must have either content or tool_calls"},
		{"null assistant", agenttest.CheckEmptyAssistant, msgs(usr, `{"role":"assistant","content":null}`, usr), "messages[1]"},
		{"template: alternating", agenttest.CheckTemplate, msgs(sys, usr, asst, usr, call(`{}`), tool, tool, asst, usr), ""},
		{"template: no system", agenttest.CheckTemplate, msgs(usr, asst, usr), ""},
		{"template: system later", agenttest.CheckTemplate, msgs(sys, usr, sys), "messages[2]: System message must be at the beginning."},
		{"template: two systems", agenttest.CheckTemplate, msgs(sys, sys, usr), "messages[1]: System message must be at the beginning."},
		{"template: assistant first", agenttest.CheckTemplate, msgs(sys, asst, usr), "messages[1]: Conversation roles must alternate user/assistant/user/assistant/... (assistant after the start)"},
		{"template: two users", agenttest.CheckTemplate, msgs(usr, usr), "messages[1]: Conversation roles must alternate"},
		{"template: two assistants", agenttest.CheckTemplate, msgs(usr, asst, asst, usr), "(assistant after assistant)"},
		{"template: user after tool", agenttest.CheckTemplate, msgs(usr, call(`{}`), tool, usr), "(user after tool)"},
		{"template: tool after text", agenttest.CheckTemplate, msgs(usr, asst, tool), "(tool after assistant)"},
		{"template: user after calls", agenttest.CheckTemplate, msgs(usr, call(`{}`), usr), "(user after assistant with tool calls)"},
		{"template: assistant last", agenttest.CheckTemplate, msgs(usr, asst), "Expected last role User or Tool"},
		{"all: every rule", agenttest.CheckAll, msgs(sys, usr, call(`{}`), tool, asst, usr), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			s.Enforce(tt.check)
			s.Enqueue(agenttest.Reply().Text("ok").Finish("stop"))
			want := http.StatusOK
			if tt.says != "" {
				want = http.StatusBadRequest
			}
			body := post(t, s, tt.body, want)
			if tt.says != "" {
				var e struct {
					Error struct{ Message, Type string } `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e.Error.Message, tt.says) || e.Error.Type != "invalid_request_error" {
					t.Errorf("error body %s, want an invalid_request_error saying %q", body, tt.says)
				}
				if s.Pending() != 1 {
					t.Errorf("a refused request took the scripted response")
				}
				if n := len(s.Requests()); n != 1 {
					t.Errorf("recorded %d requests, want the refused one", n)
				}
				// Without the check the same request is served.
				s.Enforce(0)
				post(t, s, tt.body, http.StatusOK)
			}
		})
	}
}
