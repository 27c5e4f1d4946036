package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	qs, err := checkQuestions(a.Questions)
	if err != nil {
		return FormRequest{}, err
	}
	return FormRequest{Type: TypeFormRequest, Title: a.Title, Questions: qs}, nil
}

// AskUserQuestion returns the ask_user_question tool, whose forms f
// registers and answers.
//
// The model calls it with a list of questions, each of a kind ("text",
// "single" or "multiple", the choice ones with options) and an optional id,
// and an optional title:
//
//	{"title":"Trip","questions":[{"id":"seat","question":"Seat?","kind":"single","options":["window","aisle"]}]}
//
// The tool skips approval: it is the user's interaction itself. Its side
// message registers the form with f and is a [FormRequest] (the side chunk's
// Side holds the FormRequest value), yielded right after the call's
// executing chunk; the host shows the form and gives the user's answers to
// [Forms.Answer] (or its HTTP handler) with the session id and the form id.
// The call then returns the answers to the model as JSON, in question order,
// a string for a text or single choice question and an array for a multiple
// choice:
//
//	{"answers":[{"id":"seat","question":"Seat?","answer":"window"}]}
//
// When nobody answers within f's timeout, or the form is cancelled
// ([Forms.CancelSession]), the call returns an error the model reads (the
// tool message "error: ..."), and the run goes on. When the run is
// interrupted the call returns at once with the context's error. Questions
// that do not make a form (see [ErrInvalidForm]) and a run without
// agent.Input.SessionID are errors for the model too, and show no form.
//
// A call whose side message failed (no side chunk was yielded) registers
// its form when it starts, so that it can still be answered: a front end
// finds it with [Forms.Pending].
//
// The tool is resumable (agent.ToolDefinition.Resumable): with a Forms
// that has a Store and a run that keeps open-call records, a form survives
// its process. The call suspends its run after [FormsConfig.SuspendAfter]
// (and when the host suspends the run); after a restart, or on another
// replica, the resumed turn runs the call again, which takes up the same
// form by the call's key: answered meanwhile, the answers reach the model
// at once; still open, the form is shown again with the same id.
func AskUserQuestion(f *Forms) agent.Tool { return askTool{f} }

type askTool struct{ forms *Forms }

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

// SideMessage registers the call's form and returns its FormRequest. A
// resumed turn's call (the same durable key) gets the form it asked
// before, with the same id.
func (t askTool) SideMessage(ctx context.Context, call agent.ToolCall) (any, error) {
	req, err := parseAsk(call.Arguments)
	if err != nil {
		return nil, err
	}
	info, session, key, ok := callOf(ctx)
	if !ok {
		return nil, errors.New("interact: ask_user_question's side message outside a run (no agent call in the context)")
	}
	if session == "" {
		return nil, fmt.Errorf("%w (set agent.Input.SessionID: forms are answered per session)", ErrNoSession)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t.forms.register(ctx, info, session, key, req)
}

// Execute waits for the answers to the call's form.
func (t askTool) Execute(ctx context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
	info, session, key, ok := callOf(ctx)
	var h *handoff
	if ok {
		h = t.forms.take(key)
	}
	if h == nil {
		req, err := parseAsk(args)
		if err != nil {
			return "", err
		}
		if session == "" {
			return "", fmt.Errorf("%w: the form cannot be answered (the host must set agent.Input.SessionID)", ErrNoSession)
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		w, req, err := t.forms.open(ctx, info, session, req)
		if err != nil {
			return "", err
		}
		h = &handoff{w: w, req: req}
	}
	answers, err := t.forms.wait(ctx, h.w, h.req.Questions)
	if err != nil {
		return "", err
	}
	return resultText(h.req.Questions, answers), nil
}
