// Package interact has the tools through which a model talks to the user
// beside its reply: ask_user_question, which shows a form and waits for the
// answers, and show_card, which shows a card. Both skip approval (one is the
// user's interaction itself, the other changes nothing) and announce what
// to show as a side message, which the agent yields as a side chunk right
// after the call's executing chunk (see agent.SideMessenger):
//
//	{"kind":"side","round":1,"tool":{"id":"call_2","name":"ask_user_question"},
//	 "side":{"type":"form_request","form_id":"5f0c…","questions":[{"id":"q1","question":"Which city?","kind":"text"}]}}
//	{"kind":"side","round":1,"tool":{"id":"call_3","name":"show_card"},
//	 "side":{"type":"card","title":"Paris","body":"Sunny all week."}}
//
// A host tells them apart by the side's type (in Go, Chunk.Side holds a
// [FormRequest] or a [Card] value).
//
// # Forms
//
// The tools ask the person through the [Asker] of their call's context: a
// runner.Runner puts its own in every run it drives (its forms, on its
// store, answered with runner.Runner.Answer), so a host that drives its
// sessions with a runner wires nothing; a host that runs agent.Run itself
// (a terminal) puts an Asker of its own there with [WithAsker].
//
// A runner's forms are records of its store, as its approvals are (see
// package approval): a form is registered before its form_request chunk is
// yielded, so answers given at any moment after the chunk is seen, even
// before the call starts to wait, are kept; the first valid answer wins;
// only the run's session may answer; runner.Runner.Stop ends a session's
// forms. With a durable store a form outlives its process: the run
// suspends while it waits, and resumes on the answer, given on any
// replica. runner.Runner.Pending lists a session's open forms
// ([PendingForm]); a host answers them with runner.Runner.Answer, from its
// own handler (a browser), which checks who is asking first (see package
// ui).
//
// # Requests for input of MCP servers
//
// An Asker's Elicit is how a tool shows a form it did not write itself: an
// MCP server's request for input (elicitation, see mcpclient: the request
// reaches the Asker of the call it belongs to), in form mode (fields from
// the requested JSON schema, [FieldsOf]) or URL mode (a link whose host is
// shown, opened only after the user consents). A runner keeps it as a form
// of the same kind and store, so it is durable and answerable on any
// replica as a question form is, and runner.Runner.Pending lists it (with
// [PendingForm.Elicitation] set). It is shown with agent.ShowSide beside
// the running call's card:
//
//	{"kind":"side","round":1,"tool":{"id":"call_4","name":"book"},
//	 "side":{"type":"elicitation_request","form_id":"9a1b…","server":"travel","mode":"form","message":"Where to?",
//	         "fields":[{"name":"city","type":"string","options":["Paris","Rome"],"required":true}],
//	         "schema":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}
//
// A front end answers it with an action instead of answers
// ([FormReply.Elicitation]; in the handler's body "action" and "content"):
// accept with content valid against the schema, decline, or cancel. A form
// never asks for a secret: [PrepareElicitation] refuses fields that look
// like one ([ErrSecretField]). A URL-mode request shows its host in ASCII (an
// international name as punycode) and a link of at most [MaxURLBytes],
// and a host with a character a person cannot see is refused.
package interact
