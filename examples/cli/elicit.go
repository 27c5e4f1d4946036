package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/planround/planround/interact"
)

// askElicitation asks on out what an MCP server asks the user (an
// elicitation_request), reading with readLine:
//
//   - in URL mode it shows the link's host and the link, which it never
//     opens itself, and asks whether the user will open it (accept), says
//     no (decline) or leaves it (cancel);
//   - in form mode it asks first whether to fill the form in, then each
//     field: a line of text (empty leaves an optional field out), a number,
//     y or n, an option's number, or options' numbers separated by commas.
//
// The server's name comes first: the question is the server's, not the
// assistant's. It returns the answer, or the error of readLine.
func askElicitation(ctx context.Context, readLine func(context.Context) (string, error), out io.Writer, r interact.ElicitationRequest) (interact.ElicitationAnswer, error) {
	fmt.Fprintf(out, "\nThe MCP server %s asks: %s\n", oneLine(r.Server, maxLineChars), oneLine(r.Message, maxLineChars))
	if r.Mode == interact.ModeURL {
		fmt.Fprintf(out, "It asks you to open a link on %s:\n  %s\n", oneLine(r.Host, maxLineChars), oneLine(r.URL, interact.MaxURLBytes))
	}
	verb := "fill in the form"
	if r.Mode == interact.ModeURL {
		verb = "open the link (in your browser)"
	}
	for {
		fmt.Fprintf(out, "%s? [y]es, [n]o (decline), [c]ancel: ", verb)
		line, err := readLine(ctx)
		if err != nil {
			fmt.Fprintln(out)
			return interact.ElicitationAnswer{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
		case "n", "no":
			return interact.ElicitationAnswer{Action: interact.ActionDecline}, nil
		case "c", "cancel":
			return interact.ElicitationAnswer{Action: interact.ActionCancel}, nil
		default:
			continue
		}
		break
	}
	if r.Mode == interact.ModeURL {
		return interact.ElicitationAnswer{Action: interact.ActionAccept}, nil
	}
	content := make(map[string]any, len(r.Fields))
	for i, f := range r.Fields {
		label := f.Title
		if label == "" {
			label = f.Name
		}
		req := ""
		if f.Required {
			req = " (required)"
		}
		fmt.Fprintf(out, "(%d/%d) %s%s\n", i+1, len(r.Fields), oneLine(label, maxLineChars), req)
		if f.Description != "" {
			fmt.Fprintf(out, "  %s\n", oneLine(f.Description, maxLineChars))
		}
		for j, o := range f.Options {
			name := o
			if j < len(f.Labels) {
				name = f.Labels[j]
			}
			fmt.Fprintf(out, "  %d. %s\n", j+1, oneLine(name, maxLineChars))
		}
		for {
			fmt.Fprint(out, fieldPrompt(f))
			line, err := readLine(ctx)
			if err != nil {
				fmt.Fprintln(out)
				return interact.ElicitationAnswer{}, err
			}
			v, problem := parseField(f, strings.TrimSpace(line))
			if problem != "" {
				fmt.Fprintf(out, "  %s\n", problem)
				continue
			}
			if v != nil {
				content[f.Name] = v
			}
			break
		}
	}
	return interact.ElicitationAnswer{Action: interact.ActionAccept, Content: content}, nil
}

// fieldPrompt is what the terminal shows before reading a field's value.
func fieldPrompt(f interact.ElicitField) string {
	switch {
	case f.Type == "array":
		return fmt.Sprintf("choose any, numbers separated by commas [1-%d]: ", len(f.Options))
	case len(f.Options) > 0:
		return fmt.Sprintf("choose one [1-%d]: ", len(f.Options))
	case f.Type == "boolean":
		return "[y]es or [n]o: "
	case f.Type == "number" || f.Type == "integer":
		return f.Type + ": "
	case f.Format != "":
		return f.Format + ": "
	}
	return "answer: "
}

// parseField reads line as a value of f: nil (with no problem) leaves an
// optional field out.
func parseField(f interact.ElicitField, line string) (v any, problem string) {
	if line == "" && f.Type != "array" {
		if f.Required {
			return nil, "this field is required"
		}
		return nil, ""
	}
	switch {
	case f.Type == "array":
		chosen := []any{}
		for _, s := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			o, ok := pickOption(f.Options, s)
			if !ok {
				return nil, fmt.Sprintf("%q is not an option: give numbers from 1 to %d", oneLine(s, 40), len(f.Options))
			}
			chosen = append(chosen, o)
		}
		return chosen, ""
	case len(f.Options) > 0:
		o, ok := pickOption(f.Options, line)
		if !ok {
			return nil, fmt.Sprintf("give a number from 1 to %d", len(f.Options))
		}
		return o, ""
	case f.Type == "boolean":
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			return true, ""
		case "n", "no", "false":
			return false, ""
		}
		return nil, "answer y or n"
	case f.Type == "integer":
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, "give a whole number"
		}
		return n, ""
	case f.Type == "number":
		n, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return nil, "give a number"
		}
		return n, ""
	}
	return line, ""
}

// answerElicitation asks an MCP server's question on the terminal and gives
// the answer to its form; content the server's schema refuses is asked
// again (at most three times, then the request is cancelled). When the
// input ends, the request is cancelled, and it reports false.
func (c *cli) answerElicitation(ctx context.Context, r interact.ElicitationRequest) bool {
	for range 3 {
		ans, err := askElicitation(ctx, c.in.next, c.stderr, r)
		if err != nil {
			if ctx.Err() != nil {
				return true
			}
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(c.stderr, "cli: reading the answer: %v\n", err)
			}
			c.forms.cancelAll()
			return false
		}
		open, err := c.forms.answerElicitation(r.FormID, ans)
		switch {
		case errors.Is(err, interact.ErrInvalidAnswers):
			fmt.Fprintf(c.stderr, "cli: %s\n", strings.TrimPrefix(err.Error(), "interact: "))
			continue
		case err != nil:
			fmt.Fprintf(c.stderr, "cli: the answer was refused: %v\n", err)
			c.forms.cancelAll()
		case !open:
			fmt.Fprintln(c.stderr, "cli: the request is no longer open (it timed out or its run ended): the answer was not sent")
		}
		return true
	}
	c.forms.cancelAll()
	return true
}
