package agui

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRunInput feeds the decoding of a RunAgentInput with what a network
// may send: the handler's reading must not panic, and what it accepts must
// hold what it relies on.
func FuzzRunInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hello"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","value":"x"}},{"type":"text","text":"b"}]}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"call_r/call_q","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Quito\"}"}}]}],"resume":[{"interruptId":"i1","status":"resolved","payload":{"approved":true}}]}`,
		`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i1","status":"cancelled"},{"interruptId":"i1","status":"resolved"}]}`,
		`{"threadId":"","runId":"r","messages":null}`,
		`{"threadId":"t","runId":"r","messages":[{"role":"user","content":null}],"state":{},"tools":[],"context":[],"forwardedProps":{}}`,
		`[]`, `null`, `{"messages":[{"toolCalls":[{}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in runInput
		if json.Unmarshal(b, &in) != nil {
			return
		}
		err := in.validate()
		text, isUser := in.lastUserText()
		if newText, ok := in.newUserText(); ok && (newText != text || newText == "" || !isUser) {
			t.Fatalf("newUserText %q, lastUserText %q %v", newText, text, isUser)
		}
		ids := in.toolCallIDs()
		for _, id := range ids {
			c, ok := in.findCall(id)
			if !ok || (c.ID != id && !strings.HasSuffix(c.ID, "/"+id)) {
				t.Fatalf("findCall(%q) = %q, %v", id, c.ID, ok)
			}
		}
		if err != nil {
			return
		}
		if in.ThreadID == "" || in.RunID == "" {
			t.Fatalf("accepted an input without ids: %+v", in)
		}
		seen := map[string]bool{}
		for _, r := range in.Resume {
			if r.InterruptID == "" || seen[r.InterruptID] || (r.Status != statusResolved && r.Status != statusCancelled) {
				t.Fatalf("accepted resume entry %+v", r)
			}
			seen[r.InterruptID] = true
		}
		if text != "" && !isUser {
			t.Fatalf("text %q from a message that is not the user's", text)
		}
	})
}

func TestLastUserText(t *testing.T) {
	tests := []struct {
		body string
		want string
		ok   bool
	}{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "hi", true},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}]}`, "ab", true},
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, "", false},
		{`{"messages":[]}`, "", false},
	}
	for _, tt := range tests {
		var in runInput
		if err := json.Unmarshal([]byte(tt.body), &in); err != nil {
			t.Fatal(err)
		}
		if got, ok := in.lastUserText(); got != tt.want || ok != tt.ok {
			t.Errorf("%s: %q %v, want %q %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNewUserText: a resume brings a new message only when the user wrote
// after the assistant's messages of the turn it resumes.
func TestNewUserText(t *testing.T) {
	tests := []struct {
		body string
		want string
		ok   bool
	}{
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","toolCalls":[{"id":"c"}]},{"role":"user","content":"moved on"}]}`, "moved on", true},
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant"},{"role":"tool","content":"x"},{"role":"user","content":"moved on"}]}`, "moved on", true},
		{`{"messages":[{"role":"user","content":"hi"}]}`, "", false},                                                   // the turn's own message
		{`{"messages":[{"role":"user","content":"hi"},{"role":"user","content":"again"}]}`, "", false},                 // no assistant between
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","toolCalls":[{"id":"c"}]}]}`, "", false},     // a plain resume
		{`{"messages":[{"role":"user","content":"hi"},{"role":"assistant"},{"role":"user","content":""}]}`, "", false}, // no text
		{`{"messages":[{"role":"assistant"},{"role":"user","content":[{"type":"text","text":"a"}]}]}`, "a", true},
	}
	for _, tt := range tests {
		var in runInput
		if err := json.Unmarshal([]byte(tt.body), &in); err != nil {
			t.Fatal(err)
		}
		if got, ok := in.newUserText(); got != tt.want || ok != tt.ok {
			t.Errorf("%s: %q %v, want %q %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}
