package interact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testQuestions = []Question{
	{ID: "name", Question: "Your name?", Kind: KindText},
	{ID: "seat", Question: "Seat?", Kind: KindSingle, Options: []string{"window", "aisle"}},
	{ID: "meals", Question: "Meals?", Kind: KindMultiple, Options: []string{"veg", "fish", "meat"}},
}

func TestCheckQuestions(t *testing.T) {
	qs, err := CheckQuestions([]Question{
		{Question: "A?", Kind: KindText, Options: []string{}},
		{ID: "b", Question: "B?", Kind: KindSingle, Options: []string{"x"}},
		{Question: "C?", Kind: KindMultiple, Options: []string{"x", "y"}},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"q1", "b", "q3"}, []string{qs[0].ID, qs[1].ID, qs[2].ID})
	assert.Nil(t, qs[0].Options)

	many := make([]Question, MaxQuestions+1)
	for i := range many {
		many[i] = Question{Question: "?", Kind: KindText}
	}
	manyOptions := make([]string, MaxOptions+1)
	for i := range manyOptions {
		manyOptions[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct {
		name string
		qs   []Question
		want string
	}{
		{"none", nil, "no questions"},
		{"too many", many, "21 questions, at most 20"},
		{"no text", []Question{{Question: " ", Kind: KindText}}, "no question text"},
		{"unknown kind", []Question{{Question: "?", Kind: "essay"}}, `unknown kind "essay"`},
		{"no kind", []Question{{Question: "?"}}, `unknown kind ""`},
		{"text with options", []Question{{Question: "?", Kind: KindText, Options: []string{"a"}}}, "a text question has no options"},
		{"single without options", []Question{{Question: "?", Kind: KindSingle}}, "needs options"},
		{"too many options", []Question{{Question: "?", Kind: KindMultiple, Options: manyOptions}}, "51 options, at most 50"},
		{"empty option", []Question{{Question: "?", Kind: KindSingle, Options: []string{"a", ""}}}, "an empty option"},
		{"option twice", []Question{{Question: "?", Kind: KindSingle, Options: []string{"a", "a"}}}, `option "a" given twice`},
		{"id twice", []Question{{ID: "q2", Question: "?", Kind: KindText}, {Question: "?", Kind: KindText}}, `question 2 ("q2"): id given twice`},
		{"long id", []Question{{ID: string(make([]byte, MaxIDLen+1)), Question: "?", Kind: KindText}}, "id longer than 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckQuestions(tc.qs)
			require.ErrorIs(t, err, ErrInvalidForm)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAnswerJSON(t *testing.T) {
	var a Answers
	require.NoError(t, json.Unmarshal([]byte(`{"a":"x","b":["y","z"],"c":[]}`), &a))
	assert.Equal(t, Answers{"a": {"x"}, "b": {"y", "z"}, "c": {}}, a)
	for _, bad := range []string{`{"a":1}`, `{"a":[1]}`, `{"a":[null]}`, `{"a":{"b":"c"}}`, `{"a":true}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &a), bad)
	}
	a = nil
	require.NoError(t, json.Unmarshal([]byte(`{"a":null}`), &a))
	assert.Nil(t, a["a"], "null is no answer")
	b, err := json.Marshal(Answers{"a": {"x"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":["x"]}`, string(b))
}

func TestResultText(t *testing.T) {
	qs, err := CheckQuestions(testQuestions)
	require.NoError(t, err)
	got := resultText(qs, Answers{"name": {"Ada \"Lovelace\"\n"}, "seat": {"aisle"}, "meals": {}})
	assert.JSONEq(t, `{"answers":[
		{"id":"name","question":"Your name?","answer":"Ada \"Lovelace\"\n"},
		{"id":"seat","question":"Seat?","answer":"aisle"},
		{"id":"meals","question":"Meals?","answer":[]}]}`, got)

	got = resultText(qs, Answers{"name": {"<b>Ada</b> & co"}, "seat": {"aisle"}, "meals": {}})
	assert.Contains(t, got, `"answer":"<b>Ada</b> & co"`, "the model reads what the user typed, not HTML escapes")
	assert.False(t, strings.HasSuffix(got, "\n"))
}
