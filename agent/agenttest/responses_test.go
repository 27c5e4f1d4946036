package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/planround/planround/agent/agenttest"
)

// rcall is a function call assembled from Responses events.
type rcall struct{ itemID, callID, name, args, doneArgs string }

// rresult is what a client read from one Responses stream.
type rresult struct {
	types     []string // event types in order
	text      string   // output_text deltas
	doneText  string   // output_text.done text
	reasoning string   // reasoning summary deltas
	calls     []*rcall
	final     responses.Response // from response.completed or response.incomplete
	finalType string
	errEvent  string // message of an error event
	err       error
}

// readResponses streams one Responses request with openai-go and folds its
// events the way a client would. It fails t when the sequence numbers do
// not count up from 0.
func readResponses(ctx context.Context, t *testing.T, c openai.Client, p responses.ResponseNewParams) rresult {
	t.Helper()
	var r rresult
	byItem := map[string]*rcall{}
	st := c.Responses.NewStreaming(ctx, p)
	defer st.Close()
	for st.Next() {
		e := st.Current()
		if e.SequenceNumber != int64(len(r.types)) {
			t.Errorf("event %d (%s): sequence_number %d", len(r.types), e.Type, e.SequenceNumber)
		}
		r.types = append(r.types, e.Type)
		switch v := e.AsAny().(type) {
		case responses.ResponseOutputItemAddedEvent:
			if v.Item.Type == "function_call" {
				fc := v.Item.AsFunctionCall()
				rc := &rcall{itemID: fc.ID, callID: fc.CallID, name: fc.Name}
				byItem[fc.ID] = rc
				r.calls = append(r.calls, rc)
			}
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			if rc := byItem[v.ItemID]; rc != nil {
				rc.args += v.Delta
			} else {
				t.Errorf("arguments delta for unannounced item %q", v.ItemID)
			}
		case responses.ResponseFunctionCallArgumentsDoneEvent:
			if rc := byItem[v.ItemID]; rc != nil {
				rc.doneArgs = v.Arguments
			}
		case responses.ResponseTextDeltaEvent:
			r.text += v.Delta
		case responses.ResponseTextDoneEvent:
			r.doneText += v.Text
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			r.reasoning += v.Delta
		case responses.ResponseCompletedEvent:
			r.final, r.finalType = v.Response, e.Type
		case responses.ResponseIncompleteEvent:
			r.final, r.finalType = v.Response, e.Type
		case responses.ResponseErrorEvent:
			r.errEvent = v.Message
		}
	}
	r.err = st.Err()
	return r
}

func rparams(tools ...string) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model:        "test-model",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")},
	}
	for _, name := range tools {
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:       name,
			Parameters: map[string]any{"type": "object", "properties": map[string]any{}},
		}})
	}
	return p
}

func TestResponsesText(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Reasoning("Think", "ing.").Text("Hel", "lo").
		Usage(12, 5).CachedTokens(4).ReasoningTokens(2).Finish("stop"))
	r := readResponses(t.Context(), t, c, rparams())
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != "Hello" || r.doneText != "Hello" || r.reasoning != "Thinking." {
		t.Errorf("text %q (done %q), reasoning %q; want Hello, Thinking.", r.text, r.doneText, r.reasoning)
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(r.types, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(r.types, "\n"), strings.Join(want, "\n"))
	}
	if r.finalType != "response.completed" || r.final.Status != "completed" {
		t.Errorf("final %s status %q, want response.completed completed", r.finalType, r.final.Status)
	}
	u := r.final.Usage
	if u.InputTokens != 12 || u.OutputTokens != 5 || u.TotalTokens != 17 ||
		u.InputTokensDetails.CachedTokens != 4 || u.OutputTokensDetails.ReasoningTokens != 2 {
		t.Errorf("usage = %+v, want 12 in (4 cached), 5 out (2 reasoning), 17 total", u)
	}
	if got := r.final.OutputText(); got != "Hello" {
		t.Errorf("final OutputText = %q, want Hello", got)
	}
	if len(r.final.Output) != 2 || r.final.Output[0].Type != "reasoning" ||
		len(r.final.Output[0].Summary) != 1 || r.final.Output[0].Summary[0].Text != "Thinking." {
		t.Errorf("final output = %s, want a reasoning item with summary Thinking. and a message", r.final.RawJSON())
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	req := reqs[0]
	if !req.Responses || !req.Stream || req.Model != "test-model" {
		t.Errorf("request Responses %v Stream %v Model %q, want true true test-model", req.Responses, req.Stream, req.Model)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content != "Be brief." ||
		req.Messages[1].Role != "user" || req.Messages[1].Content != "weather?" {
		t.Errorf("messages = %+v, want system Be brief., user weather?", req.Messages)
	}
}

func TestResponsesToolCall(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("Checking.").
		Call(0, "call_A", "get_weather", `{"ci`, `ty":"Pa`, `ris"}`).
		Call(1, "call_B", "get_time", `{}`).Finish("tool_calls"))
	r := readResponses(t.Context(), t, c, rparams("get_weather", "get_time"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.calls) != 2 {
		t.Fatalf("calls = %d, want 2 (events %v)", len(r.calls), r.types)
	}
	for i, want := range []rcall{
		{callID: "call_A", name: "get_weather", args: `{"city":"Paris"}`},
		{callID: "call_B", name: "get_time", args: `{}`},
	} {
		got := r.calls[i]
		if got.callID != want.callID || got.name != want.name || got.args != want.args || got.doneArgs != want.args {
			t.Errorf("call %d = %+v, want call_id %s name %s args %s", i, *got, want.callID, want.name, want.args)
		}
	}
	if r.text != "Checking." || r.finalType != "response.completed" {
		t.Errorf("text %q final %s, want Checking. response.completed", r.text, r.finalType)
	}
	var fcs []responses.ResponseFunctionToolCall
	for _, o := range r.final.Output {
		if o.Type == "function_call" {
			fcs = append(fcs, o.AsFunctionCall())
		}
	}
	if len(fcs) != 2 || fcs[0].CallID != "call_A" || fcs[0].Arguments != `{"city":"Paris"}` || fcs[1].Name != "get_time" {
		t.Errorf("final function calls = %+v", fcs)
	}
	if req := s.Requests()[0]; strings.Join(req.ToolNames(), ",") != "get_weather,get_time" {
		t.Errorf("tools = %v, want get_weather, get_time", req.ToolNames())
	}
}

// A Responses request that does not offer the tool a reply calls is
// refused, as a chat request is.
func TestResponsesUnoffered(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.CallTool("get_weather", `{}`))
	r := readResponses(t.Context(), t, c, rparams())
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 500 || !strings.Contains(apiErr.Message, "offers no tools") {
		t.Fatalf("err = %v, want HTTP 500 saying the request offers no tools", r.err)
	}
}

func TestResponsesLength(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("Long").Usage(3, 8).Finish("length"))
	r := readResponses(t.Context(), t, c, rparams())
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.finalType != "response.incomplete" || r.final.Status != "incomplete" ||
		r.final.IncompleteDetails.Reason != "max_output_tokens" || r.final.Usage.OutputTokens != 8 {
		t.Errorf("final %s status %q reason %q output tokens %d, want response.incomplete incomplete max_output_tokens 8",
			r.finalType, r.final.Status, r.final.IncompleteDetails.Reason, r.final.Usage.OutputTokens)
	}
}

func TestResponsesFaults(t *testing.T) {
	reply := agenttest.Reply().Text("a", "b", "c").Finish("stop")
	t.Run("cut", func(t *testing.T) {
		s, c := newServer(t)
		s.Enqueue(reply.CutAfter(5)) // created, in_progress, added, part added, delta "a"
		r := readResponses(t.Context(), t, c, rparams())
		if !errors.Is(r.err, io.ErrUnexpectedEOF) || r.text != "a" || r.finalType != "" {
			t.Errorf("err %v text %q final %q, want unexpected EOF after text a and no final event", r.err, r.text, r.finalType)
		}
	})
	t.Run("error", func(t *testing.T) {
		s, c := newServer(t)
		s.Enqueue(reply.ErrorAfter(6, "overloaded"))
		r := readResponses(t.Context(), t, c, rparams())
		if r.err != nil || r.errEvent != "overloaded" || r.text != "ab" || r.finalType != "" {
			t.Errorf("err %v error event %q text %q final %q, want an error event overloaded after text ab", r.err, r.errEvent, r.text, r.finalType)
		}
		if r.types[len(r.types)-1] != "error" {
			t.Errorf("last event %s, want error", r.types[len(r.types)-1])
		}
	})
	t.Run("no finish", func(t *testing.T) {
		s, c := newServer(t)
		s.Enqueue(agenttest.Reply().Text("a").Finish(""))
		r := readResponses(t.Context(), t, c, rparams())
		if r.err != nil || r.text != "a" || r.finalType != "" {
			t.Errorf("err %v text %q final %q, want text a and no final event", r.err, r.text, r.finalType)
		}
	})
}

// One Response serves either API: enqueued twice, it answers a Responses
// request and a chat-completions request with the same reply.
func TestResponsesAndChatSameReply(t *testing.T) {
	s, c := newServer(t)
	reply := agenttest.Reply().Reasoning("Hmm.").Text("Hel", "lo").
		Call(0, "call_A", "get_weather", `{"city":`, `"Paris"}`).Usage(7, 3).Finish("tool_calls")
	s.Enqueue(reply, reply)
	rr := readResponses(t.Context(), t, c, rparams("get_weather"))
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	cr := read(t.Context(), c, params("get_weather"))
	if cr.err != nil {
		t.Fatal(cr.err)
	}
	if rr.text != cr.text || rr.reasoning != cr.reasoning || cr.text != "Hello" || cr.reasoning != "Hmm." {
		t.Errorf("responses text %q reasoning %q, chat text %q reasoning %q, want Hello Hmm. in both", rr.text, rr.reasoning, cr.text, cr.reasoning)
	}
	if len(rr.calls) != 1 || len(cr.calls) != 1 || rr.calls[0].callID != cr.calls[0].id ||
		rr.calls[0].name != cr.calls[0].name || rr.calls[0].args != cr.calls[0].args {
		t.Errorf("responses calls %+v, chat calls %+v, want the same call", rr.calls, cr.calls)
	}
	if cr.finish != "tool_calls" || cr.usage.TotalTokens != 10 || rr.final.Usage.TotalTokens != 10 {
		t.Errorf("chat finish %q total %d, responses total %d; want tool_calls, 10, 10", cr.finish, cr.usage.TotalTokens, rr.final.Usage.TotalTokens)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || !reqs[0].Responses || reqs[1].Responses {
		t.Errorf("requests Responses = %v, want true then false", []bool{reqs[0].Responses, reqs[1].Responses})
	}
}

// A Responses request's input items are recorded as messages, and a
// request without "stream" gets the response object.
func TestResponsesRequestItems(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().Text("It is 21 degrees.").Finish("stop"))
	p := rparams("get_weather")
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp_c":21}`)
	out.OfFunctionCallOutput.CallID = openai.String("call_A")
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_A", "get_weather"),
		out,
	}}
	resp, err := c.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "It is 21 degrees." || resp.Status != "completed" {
		t.Errorf("response text %q status %q, want the reply, completed", resp.OutputText(), resp.Status)
	}
	req := s.Requests()[0]
	if req.Stream {
		t.Error("Stream = true for a request without stream")
	}
	var got []string
	for _, m := range req.Messages {
		line := m.Role + ":" + m.Content
		for _, tc := range m.ToolCalls {
			line += " call " + tc.ID + " " + tc.Name + " " + tc.Arguments
		}
		if m.ToolCallID != "" {
			line += " for " + m.ToolCallID
		}
		got = append(got, line)
	}
	want := []string{"system:Be brief.", "user:weather?", `assistant: call call_A get_weather {"city":"Paris"}`, `tool:{"temp_c":21} for call_A`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(req.Raw, &raw); err != nil || raw["input"] == nil {
		t.Errorf("Raw = %s (%v), want the body with its input", req.Raw, err)
	}
}

// A Response without a Responses form (Frames) is refused to a Responses
// request with HTTP 500, and a RespondFunc answers .../responses too.
func TestResponsesNoFormAndRespondFunc(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Frames(`{"choices":[]}`, "[DONE]"))
	r := readResponses(t.Context(), t, c, rparams())
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 500 || !strings.Contains(apiErr.Message, "only a chat-completions form") {
		t.Errorf("err = %v, want HTTP 500 saying the response has only a chat-completions form", r.err)
	}

	var got *agenttest.Request
	f := agenttest.RespondFunc(func(req *agenttest.Request) agenttest.Response {
		got = req
		return agenttest.Reply().Text("in process").Finish("stop")
	})
	fc := openai.NewClient(option.WithBaseURL(f.URL()), option.WithHTTPClient(f.Client()), option.WithAPIKey("k"), option.WithMaxRetries(0))
	r = readResponses(t.Context(), t, fc, rparams())
	if r.err != nil || r.text != "in process" || r.finalType != "response.completed" {
		t.Errorf("err %v text %q final %q, want in process, response.completed", r.err, r.text, r.finalType)
	}
	if got == nil || !got.Responses {
		t.Errorf("the function got %+v, want a Responses request", got)
	}
}

// Interleaved fragments of parallel calls (Fragment) stream into their
// own function_call items.
func TestResponsesInterleavedCalls(t *testing.T) {
	s, c := newServer(t)
	s.Enqueue(agenttest.Reply().
		Fragment(0, "call_A", "a", "").Fragment(1, "call_B", "b", "").
		Fragment(0, "", "", `{"x":`).Fragment(1, "", "", `{"y":`).
		Fragment(0, "", "", `1}`).Fragment(1, "", "", `2}`).Finish("content_filter"))
	r := readResponses(t.Context(), t, c, rparams("a", "b"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.calls) != 2 {
		t.Fatalf("calls = %d, want 2 (events %v)", len(r.calls), r.types)
	}
	if r.calls[0].args != `{"x":1}` || r.calls[1].args != `{"y":2}` ||
		r.calls[0].doneArgs != `{"x":1}` || r.calls[1].callID != "call_B" {
		t.Errorf("calls = %+v %+v, want call_A {\"x\":1} and call_B {\"y\":2}", *r.calls[0], *r.calls[1])
	}
	if r.finalType != "response.incomplete" || r.final.IncompleteDetails.Reason != "content_filter" {
		t.Errorf("final %s reason %q, want response.incomplete content_filter", r.finalType, r.final.IncompleteDetails.Reason)
	}
}
