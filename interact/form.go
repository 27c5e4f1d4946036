package interact

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// QuestionKind is the kind of a form's question: how it is answered.
type QuestionKind string

// The kinds of question.
const (
	// KindText is answered with free text.
	KindText QuestionKind = "text"
	// KindSingle is answered with exactly one of the question's options.
	KindSingle QuestionKind = "single"
	// KindMultiple is answered with any number of the question's options
	// (none, some or all), each at most once.
	KindMultiple QuestionKind = "multiple"
)

// Bounds of a form and of its answers.
const (
	// MaxQuestions is the largest number of questions in one form.
	MaxQuestions = 20
	// MaxOptions is the largest number of options of one question.
	MaxOptions = 50
	// MaxIDLen is the longest question id, in bytes.
	MaxIDLen = 64
	// MaxTextAnswer is the longest answer to a text question, in bytes.
	MaxTextAnswer = 16 << 10
)

// TypeFormRequest is the Type of a [FormRequest]: the "type" of the side
// message's JSON.
const TypeFormRequest = "form_request"

// Question is one question of a form.
type Question struct {
	// ID names the question in the answers. The questions of a form have
	// distinct ids; ask_user_question gives a question without one the id
	// "q" and its position from 1 ("q1", "q2", ...).
	ID string `json:"id"`
	// Question is the question's text.
	Question string `json:"question"`
	// Kind is how it is answered.
	Kind QuestionKind `json:"kind"`
	// Options are the choices of a single or multiple choice question,
	// distinct and not empty; a text question has none.
	Options []string `json:"options,omitempty"`
}

// FormRequest is the side message of an ask_user_question call: the form a
// front end shows. Its JSON, in the side chunk, is
//
//	{"type":"form_request","form_id":"5f0c…","title":"Trip",
//	 "questions":[{"id":"when","question":"When?","kind":"text"},
//	              {"id":"seat","question":"Seat?","kind":"single","options":["window","aisle"]}]}
//
// The front end answers with the form id (see runner.Runner.Answer).
type FormRequest struct {
	// Type is always [TypeFormRequest].
	Type string `json:"type"`
	// FormID is the id to answer with: 128 random bits in hex,
	// unguessable.
	FormID string `json:"form_id"`
	// Title is the form's title; it may be empty.
	Title string `json:"title,omitempty"`
	// Questions are the questions, in order.
	Questions []Question `json:"questions"`
}

// AwaitsPerson reports true: the call that shows a form waits for a
// person's answers. A runner (package runner) that shuts down suspends such
// a run, rather than interrupting it, so that the form stays answerable.
func (FormRequest) AwaitsPerson() bool { return true }

// Answers are the answers to a form, by question id; every question of the
// form has one.
type Answers map[string]Answer

// Answer is the answer to one question: one string for a text question
// (the text) and for a single choice question (the option chosen), the
// options chosen for a multiple choice question (possibly none).
//
// In JSON an Answer is a string or an array of strings: a front end may send
// "blue" or ["blue"] for a single choice, and must send an array for a
// multiple choice. It marshals as an array.
type Answer []string

// UnmarshalJSON accepts a JSON string (an answer of one string) or an array
// of strings. null leaves a unchanged, as encoding/json does: a null answer
// in [Answers] is no answer.
func (a *Answer) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = Answer{s}
		return nil
	}
	errShape := errors.New("an answer is a string or an array of strings")
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return errShape
	}
	list := make(Answer, len(raw))
	for i, r := range raw {
		if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &list[i]) != nil {
			return errShape
		}
	}
	*a = list
	return nil
}

// ErrInvalidForm is wrapped by the error for questions that do not make a
// form: none, too many, an unknown kind, choices without options, ids or
// options given twice.
var ErrInvalidForm = errors.New("interact: invalid form")

// CheckQuestions validates the questions of a form, qs, and returns them
// with default ids given, in a slice of their own; it fails, wrapping
// [ErrInvalidForm], for questions that do not make a form. An [Asker]
// checks a form's questions with it before it shows the form.
func CheckQuestions(qs []Question) ([]Question, error) {
	if len(qs) == 0 {
		return nil, fmt.Errorf("%w: no questions", ErrInvalidForm)
	}
	if len(qs) > MaxQuestions {
		return nil, fmt.Errorf("%w: %d questions, at most %d", ErrInvalidForm, len(qs), MaxQuestions)
	}
	out := make([]Question, len(qs))
	ids := make(map[string]bool, len(qs))
	for i, q := range qs {
		q.Options = append([]string(nil), q.Options...)
		if q.ID == "" {
			q.ID = "q" + strconv.Itoa(i+1)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: question %d (%q): %s", ErrInvalidForm, i+1, q.ID, fmt.Sprintf(format, args...))
		}
		switch {
		case len(q.ID) > MaxIDLen:
			return nil, bad("id longer than %d bytes", MaxIDLen)
		case ids[q.ID]:
			return nil, bad("id given twice")
		case strings.TrimSpace(q.Question) == "":
			return nil, bad("no question text")
		}
		ids[q.ID] = true
		switch q.Kind {
		case KindText:
			if len(q.Options) > 0 {
				return nil, bad("a text question has no options (use kind single or multiple for choices)")
			}
			q.Options = nil
		case KindSingle, KindMultiple:
			if len(q.Options) == 0 {
				return nil, bad("a %s choice question needs options", q.Kind)
			}
			if len(q.Options) > MaxOptions {
				return nil, bad("%d options, at most %d", len(q.Options), MaxOptions)
			}
			seen := make(map[string]bool, len(q.Options))
			for _, o := range q.Options {
				if strings.TrimSpace(o) == "" {
					return nil, bad("an empty option")
				}
				if seen[o] {
					return nil, bad("option %q given twice", o)
				}
				seen[o] = true
			}
		default:
			return nil, bad("unknown kind %q (want text, single or multiple)", q.Kind)
		}
		out[i] = q
	}
	return out, nil
}

// ErrInvalidAnswers is wrapped by the error of an answer (runner.Runner.Answer)
// that does not fit the form's questions ([CheckAnswers]). The form stays
// open.
var ErrInvalidAnswers = errors.New("interact: invalid answers")

// CheckAnswers validates a against the questions qs and returns a copy; it
// fails, wrapping [ErrInvalidAnswers], for answers that do not fit them (an
// answer for each question and none for an unknown id; one text for a text
// question, at most [MaxTextAnswer] bytes of UTF-8; one of the options for a
// single choice; distinct options for a multiple choice). An [Asker] checks
// the answers it takes with it.
func CheckAnswers(qs []Question, a Answers) (Answers, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: no answers", ErrInvalidAnswers)
	}
	byID := make(map[string]*Question, len(qs))
	for i := range qs {
		byID[qs[i].ID] = &qs[i]
	}
	for id := range a {
		if byID[id] == nil {
			return nil, fmt.Errorf("%w: no question has the id %q", ErrInvalidAnswers, describe(id))
		}
	}
	out := make(Answers, len(qs))
	for _, q := range qs {
		ans, ok := a[q.ID]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: question %q: %s", ErrInvalidAnswers, q.ID, fmt.Sprintf(format, args...))
		}
		if !ok || ans == nil {
			return nil, bad("no answer")
		}
		switch q.Kind {
		case KindText:
			if len(ans) != 1 {
				return nil, bad("want one text, got %d", len(ans))
			}
			if len(ans[0]) > MaxTextAnswer {
				return nil, bad("answer longer than %d bytes", MaxTextAnswer)
			}
			if !utf8.ValidString(ans[0]) {
				return nil, bad("answer is not valid UTF-8")
			}
		case KindSingle:
			if len(ans) != 1 {
				return nil, bad("want one option, got %d", len(ans))
			}
			if !slices.Contains(q.Options, ans[0]) {
				return nil, bad("%q is not one of its options", describe(ans[0]))
			}
		case KindMultiple:
			seen := make(map[string]bool, len(ans))
			for _, o := range ans {
				if !slices.Contains(q.Options, o) {
					return nil, bad("%q is not one of its options", describe(o))
				}
				if seen[o] {
					return nil, bad("option %q chosen twice", describe(o))
				}
				seen[o] = true
			}
		}
		out[q.ID] = append(Answer{}, ans...)
	}
	return out, nil
}

// describe shortens s for an error message.
func describe(s string) string {
	const limit = 40
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// answered is one answer as the model reads it.
type answered struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Answer   any    `json:"answer"` // a string, or []string for a multiple choice
}

// resultText is what ask_user_question returns to the model: the answers in
// question order, as JSON.
func resultText(qs []Question, a Answers) string {
	list := make([]answered, len(qs))
	for i, q := range qs {
		list[i] = answered{ID: q.ID, Question: q.Question}
		ans := a[q.ID]
		if q.Kind == KindMultiple {
			list[i].Answer = append([]string{}, ans...)
		} else if len(ans) > 0 {
			list[i].Answer = ans[0]
		}
	}
	// Not HTML-escaped: the model reads "<" as the user typed it, not "\u003c".
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Answers []answered `json:"answers"`
	}{list}) // strings and slices of them always marshal
	return strings.TrimSuffix(b.String(), "\n")
}
