package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/planround/planround/agent"
)

// askArgs are the arguments of ask_user_question.
type askArgs struct {
	Title     string     `json:"title"`
	Questions []Question `json:"questions"`
}

// askSchema is the JSON schema of ask_user_question's arguments.
var askSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"title": map[string]any{"type": "string", "description": "Optional title of the form."},
		"questions": map[string]any{
			"type":        "array",
			"description": "The questions, in the order the user sees them.",
			"minItems":    1,
			"maxItems":    MaxQuestions,
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"id":       map[string]any{"type": "string", "description": "Optional short id naming the question in the answers (default q1, q2, ...)."},
					"question": map[string]any{"type": "string", "description": "The question."},
					"kind": map[string]any{
						"type":        "string",
						"enum":        []string{string(KindText), string(KindSingle), string(KindMultiple)},
						"description": "text: free text; single: exactly one of the options; multiple: any number of the options.",
					},
					"options": map[string]any{
						"type":        "array",
						"items":       map[string]any{"type": "string"},
						"maxItems":    MaxOptions,
						"description": "The choices of a single or multiple question (distinct); none for text.",
					},
				},
				"required":             []string{"question", "kind"},
				"additionalProperties": false,
			},
		},
	},
	"required":             []string{"questions"},
	"additionalProperties": false,
}

// parseAsk decodes and checks ask_user_question's arguments.
func parseAsk(raw json.RawMessage) (FormRequest, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var a askArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return FormRequest{}, fmt.Errorf("invalid arguments: %w", err)
	}
	qs, err := CheckQuestions(a.Questions)
	if err != nil {
		return FormRequest{}, err
	}
	return FormRequest{Type: TypeFormRequest, Title: a.Title, Questions: qs}, nil
}

// AskUserQuestion returns the ask_user_question tool. It asks the person
// through the [Asker] of the call's context: a runner.Runner sets its own
// in every run it drives; a host that runs agent.Run itself sets one of
// its own with [WithAsker]. Without one the call fails with an
// error wrapping [ErrNoAsker], which the model reads.
//
// The model calls it with a list of questions, each of a kind ("text",
// "single" or "multiple", the choice ones with options) and an optional id,
// and an optional title:
//
//	{"title":"Trip","questions":[{"id":"seat","question":"Seat?","kind":"single","options":["window","aisle"]}]}
//
// The tool skips approval: it is the user's interaction itself. Its side
// message registers the form with the asker ([Asker.OpenForm]) and is a
// [FormRequest] (the side chunk's Side holds the FormRequest value),
// yielded right after the call's executing chunk; the host shows the form
// and gives the user's answers (runner.Runner.Answer, or its own Asker's)
// with the session id and the form id. The call then returns the answers
// to the model as JSON, in question order, a string for a text or single
// choice question and an array for a multiple choice:
//
//	{"answers":[{"id":"seat","question":"Seat?","answer":"window"}]}
//
// When nobody answers within the asker's timeout, or the form is cancelled
// (a stop, runner.Runner.Stop), the call returns an error the model
// reads (the tool message "error: ..."), and the run goes on. When the run
// is interrupted the call returns at once with the context's error.
// Questions that do not make a form (see [ErrInvalidForm]) and a run
// without agent.Input.SessionID are errors for the model too, and show no
// form.
//
// A call whose side message failed (no side chunk was yielded) registers
// its form when it starts, so that it can still be answered: a front end
// finds it among the session's pending forms.
//
// The tool is resumable (agent.ToolDefinition.Resumable): with an asker
// whose forms are kept in a store and a run that keeps open-call records,
// a form survives its process. The call suspends its run after the asker's
// SuspendAfter (and when the host suspends the run); after a restart, or
// on another replica, the resumed turn runs the call again, which takes up
// the same form by the call's key: answered meanwhile, the answers reach
// the model at once; still open, the form is shown again with the same id.
func AskUserQuestion() agent.Tool { return askTool{} }

type askTool struct{}

func (askTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{
		Name: "ask_user_question",
		Description: "Ask the user one or more questions in a form and wait for the answers. " +
			"Use it when you need information or a choice only the user can give. " +
			"Each question is free text (kind text), one choice among options (single) or several choices (multiple).",
		Parameters:   askSchema,
		SkipApproval: true,
		Resumable:    true,
	}
}

// SideMessage registers the call's form with the asker and returns its
// FormRequest.
func (askTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	req, err := parseAsk(call.Arguments)
	if err != nil {
		return nil, err
	}
	a, err := askerOf(ctx, "ask_user_question")
	if err != nil {
		return nil, err
	}
	return a.OpenForm(ctx, req)
}

// Execute waits for the answers to the call's form.
func (askTool) Execute(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
	req, err := parseAsk(args)
	if err != nil {
		return "", err
	}
	a, err := askerOf(ctx, "ask_user_question")
	if err != nil {
		return "", err
	}
	form, answers, err := a.AwaitForm(ctx, req)
	if err != nil {
		return "", err
	}
	return resultText(form.Questions, answers), nil
}
