package agenttest

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Plan returns the reply to an agent's planning round that leads to its
// tool loop: text, then the <need_tool> intent tag, finished with "stop".
// It is Reply().Text(text + "<need_tool>").Finish("stop"): the text the
// agent shows for round 0 is text itself. Enqueue it before the reply that
// calls a tool:
//
//	srv.Enqueue(agenttest.Plan("Let me check."), agenttest.CallTool("get_weather", `{"city":"Paris"}`))
//
// For a turn that needs no tool, the planning reply ends with <no_tool>
// instead and one more reply (the continuation round) follows:
// Reply().Text("Hello! <no_tool>").Finish("stop").
func Plan(text string) Response {
	return Reply().Text(text + "<need_tool>").Finish("stop")
}

var callSeq atomic.Int64

// CallTool returns a reply that calls the tool name with the JSON
// arguments, finished with "tool_calls": Reply().Call(0, id, name,
// arguments).Finish("tool_calls") with a fresh call id. An agent runs the
// call only in a request that offers tools, so in a run with a planning
// round it comes after the planning reply (see [Plan]).
func CallTool(name, arguments string) Response {
	id := fmt.Sprintf("call_agenttest%d", callSeq.Add(1))
	return Reply().Call(0, id, name, arguments).Finish("tool_calls")
}

// Unsolicited returns r served as it is to any request, also with tool
// calls the request does not offer: for a test of what a client does with
// a model that calls a tool it was not given (during an agent's planning
// round, or a tool whose name it made up). Without it, a [Server] or a
// [RespondFunc] answers such a request with HTTP 500 and a message saying
// which call the request does not offer, instead of serving r.
func (r Response) Unsolicited() Response {
	r.unsolicited = true
	return r
}

// maxDescribed bounds the text of a reply that a message about the
// script quotes.
const maxDescribed = 40

// describe names r in a message about the script: what it answers with,
// in a few words.
func (r Response) describe() string {
	if r.status != 0 {
		return fmt.Sprintf("an HTTP %d answer", r.status)
	}
	var b strings.Builder
	b.WriteString("a reply")
	if r.text != "" {
		text := r.text
		if len(text) > maxDescribed {
			text = strings.ToValidUTF8(text[:maxDescribed], "") + "…"
		}
		fmt.Fprintf(&b, " with text %q", text)
	}
	if len(r.calls) > 0 {
		if r.text != "" {
			b.WriteString(" and")
		}
		fmt.Fprintf(&b, " calling %s", strings.Join(r.calls, ", "))
	}
	if r.text == "" && len(r.calls) == 0 {
		fmt.Fprintf(&b, " of %d frames", len(r.frames))
	}
	return b.String()
}

// unoffered returns the first tool r calls that req does not offer, or
// "" when req offers them all or r is unsolicited.
func unoffered(req *Request, r Response) string {
	if r.unsolicited {
		return ""
	}
	for _, name := range r.calls {
		if !req.HasTool(name) {
			return name
		}
	}
	return ""
}

// unofferedMessage says why resp, which calls name, cannot answer req,
// and what to do; fromRespond says that a function chose resp, not the
// script's queue.
func unofferedMessage(req *Request, resp Response, name string, fromRespond bool) string {
	var b strings.Builder
	b.WriteString("agenttest: ")
	if req.Seq > 0 {
		fmt.Fprintf(&b, "request %d", req.Seq)
	} else {
		b.WriteString("a request")
	}
	who := "the script's next response"
	if fromRespond {
		who = "the function's response"
	}
	if req.HasTools() {
		fmt.Fprintf(&b, " offers the tools %s, but %s is %s, and %s is not among them: the agent would reject the call as an unknown tool. ",
			strings.Join(req.ToolNames(), ", "), who, resp.describe(), name)
	} else {
		fmt.Fprintf(&b, " offers no tools, but %s is %s. ", who, resp.describe())
		b.WriteString("An agent's run starts with a planning round, a request without tools, and ignores the tool calls of its reply: the tool would never run (and an agent without tools offers none in any round). ")
		if fromRespond {
			b.WriteString("Answer a request without tools (Request.HasTools is false) with a planning reply (agenttest.Plan)")
		} else {
			b.WriteString("Enqueue a planning reply before it (agenttest.Plan)")
		}
		b.WriteString(", or set agent.Config.DisablePlanning. ")
	}
	b.WriteString("Response.Unsolicited serves such a reply anyway.")
	return b.String()
}

// exhaustedMessage says that request req found the script empty after
// served responses, and what a run's requests are.
func exhaustedMessage(req *Request, served int) string {
	return fmt.Sprintf("agenttest: script exhausted: request %d (%s) arrived after the script's %d %s served, and no Respond func is set. "+
		"An agent's run makes one request per round: the planning round (no tools), "+
		"then after a planning reply that ends in <no_tool> one continuation round (no tools), "+
		"else a tool round (with tools) for each reply that calls tools and one more for the answer",
		req.Seq, requestSummary(req), served, plural(served, "response was", "responses were"))
}

// requestSummary says in a few words what req offers and ends with.
func requestSummary(req *Request) string {
	var b strings.Builder
	if req.HasTools() {
		fmt.Fprintf(&b, "offering %s", strings.Join(req.ToolNames(), ", "))
	} else {
		b.WriteString("no tools")
	}
	last := req.LastMessage()
	text := last.Content
	if len(text) > maxDescribed {
		text = strings.ToValidUTF8(text[:maxDescribed], "") + "…"
	}
	fmt.Fprintf(&b, ", last message %s %q", last.Role, text)
	return b.String()
}

// leftoverMessage says that the responses in left were never served by a
// server that received requests requests.
func leftoverMessage(left []Response, requests int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "agenttest: %d scripted %s never served (the server received %d %s):",
		len(left), plural(len(left), "response was", "responses were"), requests, plural(requests, "request", "requests"))
	for i, r := range left {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteByte(' ')
		b.WriteString(r.describe())
	}
	b.WriteString(". The run made fewer requests than the script expects: a planning reply that ends in <no_tool> is followed by one continuation round and no tool round, " +
		"a reply without tool calls in the tool loop ends the run, and a run that fails or is interrupted ends early")
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
