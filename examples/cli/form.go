package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/planround/planround/interact"
)

// askForm asks the questions of a form on out, one after the other, and
// reads each answer with readLine, the same line source as the approver and
// the prompt loop:
//
//   - a single choice by the option's number (or its text);
//   - a multiple choice by the options' numbers separated by commas or
//     spaces, an empty line for none;
//   - a text question by one line.
//
// An answer that does not fit says why and asks again. It returns the
// answers, or the error of readLine: io.EOF when the input ended, the
// context's error when ctx ended.
func askForm(ctx context.Context, readLine func(context.Context) (string, error), out io.Writer, fr interact.FormRequest) (interact.Answers, error) {
	title := oneLine(fr.Title, maxLineChars)
	if title == "" {
		title = "questions"
	}
	fmt.Fprintf(out, "\nForm: %s (%d %s; Ctrl-D cancels it)\n", title, len(fr.Questions), plural(len(fr.Questions), "question"))
	answers := make(interact.Answers, len(fr.Questions))
	for i, q := range fr.Questions {
		fmt.Fprintf(out, "(%d/%d) %s\n", i+1, len(fr.Questions), oneLine(q.Question, maxLineChars))
		for j, o := range q.Options {
			fmt.Fprintf(out, "  %d. %s\n", j+1, oneLine(o, maxLineChars))
		}
		for {
			fmt.Fprint(out, questionPrompt(q))
			line, err := readLine(ctx)
			if err != nil {
				fmt.Fprintln(out)
				return nil, err
			}
			a, problem := parseFormAnswer(q, line)
			if problem != "" {
				fmt.Fprintf(out, "  %s\n", problem)
				continue
			}
			answers[q.ID] = a
			break
		}
	}
	return answers, nil
}

// questionPrompt is what the terminal shows before reading an answer to q.
func questionPrompt(q interact.Question) string {
	switch q.Kind {
	case interact.KindSingle:
		return fmt.Sprintf("choose one [1-%d]: ", len(q.Options))
	case interact.KindMultiple:
		return fmt.Sprintf("choose any, numbers separated by commas [1-%d], empty for none: ", len(q.Options))
	}
	return "answer: "
}

// parseFormAnswer reads line as an answer to q; problem says what is wrong
// with it, for the user, when it does not fit.
func parseFormAnswer(q interact.Question, line string) (a interact.Answer, problem string) {
	line = strings.TrimSpace(line)
	switch q.Kind {
	case interact.KindSingle:
		if o, ok := pickOption(q.Options, line); ok {
			return interact.Answer{o}, ""
		}
		if line == "" {
			return nil, fmt.Sprintf("choose one of the options: a number from 1 to %d", len(q.Options))
		}
		return nil, fmt.Sprintf("%q is not one of the options: give a number from 1 to %d", oneLine(line, 40), len(q.Options))
	case interact.KindMultiple:
		chosen := interact.Answer{}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			o, ok := pickOption(q.Options, f)
			if !ok {
				return nil, fmt.Sprintf("%q is not an option: give numbers from 1 to %d, separated by commas", oneLine(f, 40), len(q.Options))
			}
			if !slices.Contains(chosen, o) {
				chosen = append(chosen, o)
			}
		}
		return chosen, ""
	default:
		switch {
		case !utf8.ValidString(line):
			return nil, "the answer is not valid text (UTF-8): type it again"
		case len(line) > interact.MaxTextAnswer:
			return nil, fmt.Sprintf("the answer is too long (%d bytes, at most %d): type a shorter one", len(line), interact.MaxTextAnswer)
		}
		return interact.Answer{line}, ""
	}
}

// pickOption returns the option s names: its number from 1, or its text (any
// case).
func pickOption(options []string, s string) (string, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 1 && n <= len(options) {
			return options[n-1], true
		}
		return "", false
	}
	for _, o := range options {
		if s != "" && strings.EqualFold(o, s) {
			return o, true
		}
	}
	return "", false
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
