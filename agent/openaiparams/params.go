// Package openaiparams converts the SDK's messages ([memory.Message]) to
// and from openai-go's chat-completion request messages. It keeps
// openai-go's types off package agent's API: the agent sends every request
// through [ToParams], and a host that already holds a conversation in
// openai-go's types converts it with [FromParams] (to pass as
// agent.Input.History, say).
package openaiparams

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/planround/planround/memory"
)

// ToParams converts messages to openai-go request messages. It is the one
// place where the SDK's messages meet openai-go's request types; the agent
// sends every request through it.
//
// Tool calls without a tool message, or tool messages without their call,
// are sent as they are: keeping history valid is [memory.Repair]'s job
// (which the agent applies to the history it loads), not the converter's.
// [FromParams] converts the other way.
func ToParams(msgs []memory.Message) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, toParam(m))
	}
	return out
}

// toParam converts one message.
func toParam(m memory.Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case memory.RoleSystem:
		return openai.SystemMessage(m.Content)
	case memory.RoleTool:
		return openai.ToolMessage(m.Content, m.ToolCallID)
	case memory.RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(m.Content)
		}
		for _, c := range m.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      c.Name,
						Arguments: args,
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
	default:
		if len(m.Images) == 0 {
			return openai.UserMessage(m.Content)
		}
		// The text, then the images, as content parts.
		parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(m.Images)+1)
		if m.Content != "" {
			parts = append(parts, openai.TextContentPart(m.Content))
		}
		for _, img := range m.Images {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: imageURL(img)}))
		}
		return openai.UserMessage(parts)
	}
}

// imageURL returns the URL a request gives for img: its URL, or its bytes
// as a data: URL.
func imageURL(img memory.Image) string {
	if img.URL != "" {
		return img.URL
	}
	return "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

// imageFromURL is imageURL's inverse: a base64 data: URL gives the bytes
// and their MIME type, any other URL stays a URL.
func imageFromURL(u string) memory.Image {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		head, payload, _ := strings.Cut(rest, ",")
		if mt, ok := strings.CutSuffix(head, ";base64"); ok && mt != "" {
			if b, err := base64.StdEncoding.DecodeString(payload); err == nil {
				return memory.Image{MIMEType: mt, Data: b}
			}
		}
	}
	return memory.Image{URL: u}
}

// FromParams converts openai-go request messages to the SDK's messages, for
// a host that already holds a conversation in openai-go's types (to pass as
// agent.Input.History, say). It is [ToParams]'s inverse for the messages
// ToParams writes; developer messages become system messages, text parts
// are joined (images of a user message follow its text, wherever the parts
// stood), image parts become [memory.Image] values (bytes and MIME type for
// a base64 data: URL; the detail setting is dropped), and tool-call
// arguments that are not a JSON object are wrapped by
// [memory.ValidArguments]. Content the SDK's messages cannot represent
// (audio, files, refusals, custom tool calls, legacy function messages) is
// an error naming the message's position.
func FromParams(ps []openai.ChatCompletionMessageParamUnion) ([]memory.Message, error) {
	out := make([]memory.Message, 0, len(ps))
	for i, p := range ps {
		m, err := fromParam(p)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// fromParam converts one message; see [FromParams].
func fromParam(p openai.ChatCompletionMessageParamUnion) (memory.Message, error) {
	textParts := func(parts []openai.ChatCompletionContentPartTextParam) string {
		var b strings.Builder
		for _, t := range parts {
			b.WriteString(t.Text)
		}
		return b.String()
	}
	switch {
	case p.OfSystem != nil:
		c := p.OfSystem.Content
		return memory.Message{Role: memory.RoleSystem, Content: c.OfString.Value + textParts(c.OfArrayOfContentParts)}, nil
	case p.OfDeveloper != nil:
		c := p.OfDeveloper.Content
		return memory.Message{Role: memory.RoleSystem, Content: c.OfString.Value + textParts(c.OfArrayOfContentParts)}, nil
	case p.OfTool != nil:
		c := p.OfTool.Content
		return memory.Message{Role: memory.RoleTool, ToolCallID: p.OfTool.ToolCallID, Content: c.OfString.Value + textParts(c.OfArrayOfContentParts)}, nil
	case p.OfUser != nil:
		c := p.OfUser.Content
		m := memory.Message{Role: memory.RoleUser, Content: c.OfString.Value}
		for _, part := range c.OfArrayOfContentParts {
			switch {
			case part.OfText != nil:
				m.Content += part.OfText.Text
			case part.OfImageURL != nil:
				m.Images = append(m.Images, imageFromURL(part.OfImageURL.ImageURL.URL))
			case part.OfInputAudio != nil:
				return memory.Message{}, errors.New("openaiparams: user content part of type input_audio is not supported")
			default:
				return memory.Message{}, fmt.Errorf("openaiparams: user content part of type %q is not supported", derefType(part.GetType()))
			}
		}
		return m, nil
	case p.OfAssistant != nil:
		a := p.OfAssistant
		m := memory.Message{Role: memory.RoleAssistant, Content: a.Content.OfString.Value}
		for _, part := range a.Content.OfArrayOfContentParts {
			if part.OfText == nil {
				return memory.Message{}, errors.New("openaiparams: assistant content part other than text (a refusal) is not supported")
			}
			m.Content += part.OfText.Text
		}
		for _, c := range a.ToolCalls {
			if c.OfFunction == nil {
				return memory.Message{}, errors.New("openaiparams: assistant tool call other than a function call is not supported")
			}
			f := c.OfFunction
			m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: f.ID, Name: f.Function.Name, Arguments: memory.ValidArguments([]byte(f.Function.Arguments))})
		}
		return m, nil
	}
	if r := derefType(p.GetRole()); r != "" {
		return memory.Message{}, fmt.Errorf("openaiparams: message of role %q is not supported", r)
	}
	return memory.Message{}, errors.New("openaiparams: empty message")
}

func derefType(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
