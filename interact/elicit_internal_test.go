package interact

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestFieldsOf: the schemas the MCP specification allows become fields in
// the order written; anything else is refused.
func TestFieldsOf(t *testing.T) {
	fields, err := FieldsOf(json.RawMessage(`{"type":"object","properties":{
		"z":{"type":"string","format":"email","description":"Mail"},
		"a":{"type":"boolean","default":true},
		"m":{"type":"string","oneOf":[{"const":"x","title":"Ex"},{"const":"y"}]},
		"tags":{"type":"array","items":{"anyOf":[{"const":"red","title":"Red"},{"const":"blue","title":"Blue"}]}},
		"n":{"type":"number","minimum":0}},"required":["z","n"]}`))
	assert.NoError(t, err)
	assert.Equal(t, []ElicitField{
		{Name: "z", Description: "Mail", Type: "string", Format: "email", Required: true},
		{Name: "a", Type: "boolean", Default: true},
		{Name: "m", Type: "string", Options: []string{"x", "y"}, Labels: []string{"Ex", "y"}},
		{Name: "tags", Type: "array", Options: []string{"red", "blue"}, Labels: []string{"Red", "Blue"}},
		{Name: "n", Type: "number", Required: true},
	}, fields)

	for _, bad := range []string{
		``, `null`, `[]`, `{"type":"array"}`, `{"type":"object"}`, `{"type":"object","properties":{}}`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","format":"password"}}}`,
		`{"type":"object","properties":{"a":{"type":"array"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
		`{"type":"object","properties":{"a":{"type":"string","enum":["x","x"]}}}`,
		`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"title":"no const"}]}}}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`,
		`{"type":"object","properties":{"":{"type":"string"}}}`,
	} {
		_, err := FieldsOf(json.RawMessage(bad))
		assert.ErrorIs(t, err, ErrInvalidForm, "%s", bad)
	}
}

// FuzzFieldsOf: any schema gives fields a form can show, or an error
// wrapping ErrInvalidForm; never a panic. An accepted schema also compiles
// for the validation of answers.
func FuzzFieldsOf(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{"type":"object","properties":{"b":{"type":"integer","minimum":1},"a":{"type":"boolean"}},"required":["a"]}`,
		`{"type":"object","properties":{"t":{"type":"array","items":{"enum":["x","y"]}}}}`,
		`{"type":"object","properties":{"m":{"type":"string","oneOf":[{"const":"x"}]}}}`,
		`{"properties":{"a":1},"type":"object"}`, `{"type":"object","properties":{"a":{"$ref":"#"}}}`, `{`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		fields, err := FieldsOf(schema)
		if err != nil {
			if !errors.Is(err, ErrInvalidForm) {
				t.Fatalf("error %v does not wrap ErrInvalidForm", err)
			}
			return
		}
		if len(fields) == 0 || len(fields) > MaxElicitFields {
			t.Fatalf("%d fields", len(fields))
		}
		for _, fl := range fields {
			if fl.Name == "" || !slices.Contains([]string{"string", "number", "integer", "boolean", "array"}, fl.Type) {
				t.Fatalf("field %+v", fl)
			}
			if fl.Type == "array" && len(fl.Options) == 0 {
				t.Fatalf("an array field without options: %+v", fl)
			}
			if len(fl.Labels) != 0 && len(fl.Labels) != len(fl.Options) {
				t.Fatalf("labels do not match options: %+v", fl)
			}
		}
		if utf8.Valid(schema) {
			_, _ = PrepareElicitation(ElicitationRequest{Schema: schema}) // never panics
		}
	})
}

// FuzzElicitationAnswer: any answer a front end sends (an action and a
// content, as the handler decodes them) to a form is taken only when it
// fits the requested schema, and never panics.
func FuzzElicitationAnswer(f *testing.F) {
	const schema = `{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]},` +
		`"nights":{"type":"integer","minimum":1,"maximum":14},"late":{"type":"boolean"},` +
		`"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}}},"required":["city"]}`
	req, err := PrepareElicitation(ElicitationRequest{Schema: json.RawMessage(schema)})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"action":"accept","content":{"city":"Rome","nights":3}}`, `{"action":"accept","content":{"city":"Oslo"}}`,
		`{"action":"decline","content":{"x":1}}`, `{"action":"cancel"}`, `{"action":"accept"}`, `{"action":""}`,
		`{"action":"accept","content":{"city":"Paris","tags":["a","a"],"late":true,"nights":1e3}}`, `{}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ans ElicitationAnswer
		if json.Unmarshal(body, &ans) != nil {
			return
		}
		got, err := checkElicitation(req, &ans)
		if err != nil {
			if !errors.Is(err, ErrInvalidAnswers) {
				t.Fatalf("error %v does not wrap ErrInvalidAnswers", err)
			}
			return
		}
		switch got.Action {
		case ActionAccept:
			city, _ := got.Content["city"].(string)
			if city != "Paris" && city != "Rome" {
				t.Fatalf("accepted content %v", got.Content)
			}
		case ActionDecline, ActionCancel:
			if got.Content != nil {
				t.Fatalf("content passed on with %s", got.Action)
			}
		default:
			t.Fatalf("action %q", got.Action)
		}
	})
}
