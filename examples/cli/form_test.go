package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/interact"
)

func TestParseFormAnswer(t *testing.T) {
	single := interact.Question{ID: "s", Kind: interact.KindSingle, Options: []string{"red", "Green", "12"}}
	multiple := interact.Question{ID: "m", Kind: interact.KindMultiple, Options: []string{"a", "b", "c"}}
	text := interact.Question{ID: "t", Kind: interact.KindText}
	for _, tc := range []struct {
		q       interact.Question
		line    string
		want    interact.Answer
		problem string // a part of it; "" for none
	}{
		{single, " 2 ", interact.Answer{"Green"}, ""},
		{single, "green", interact.Answer{"Green"}, ""},
		{single, "RED", interact.Answer{"red"}, ""},
		{single, "12", nil, `"12" is not one of the options`}, // numbers are positions
		{single, "0", nil, "not one of the options"},
		{single, "", nil, "choose one of the options: a number from 1 to 3"},
		{multiple, "3,1", interact.Answer{"c", "a"}, ""},
		{multiple, "1 2,, 1", interact.Answer{"a", "b"}, ""}, // given twice: once
		{multiple, "", interact.Answer{}, ""},
		{multiple, "1,x", nil, `"x" is not an option`},
		{text, "  hello  ", interact.Answer{"hello"}, ""},
		{text, "", interact.Answer{""}, ""},
		{text, "\xff", nil, "not valid text"},
		{text, strings.Repeat("a", interact.MaxTextAnswer+1), nil, "too long"},
	} {
		got, problem := parseFormAnswer(tc.q, tc.line)
		if tc.problem != "" {
			assert.Contains(t, problem, tc.problem, "%s %q", tc.q.Kind, tc.line)
			assert.Nil(t, got)
			continue
		}
		assert.Empty(t, problem, "%s %q", tc.q.Kind, tc.line)
		assert.Equal(t, tc.want, got, "%s %q", tc.q.Kind, tc.line)
	}
}

// askForm returns the input's end, and the context's error, as they are.
func TestAskFormEnds(t *testing.T) {
	fr := interact.FormRequest{Questions: []interact.Question{{ID: "t", Question: "Why?\x1b[2J", Kind: interact.KindText}}}
	var out strings.Builder
	_, err := askForm(t.Context(), func(context.Context) (string, error) { return "", io.EOF }, &out, fr)
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, "\nForm: questions (1 question; Ctrl-D cancels it)\n(1/1) Why?[2J\nanswer: \n", out.String(), "no escape sequence reaches the terminal")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = askForm(ctx, func(ctx context.Context) (string, error) { return "", ctx.Err() }, io.Discard, fr)
	assert.True(t, errors.Is(err, context.Canceled))
}
