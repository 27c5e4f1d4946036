package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/planround/planround/agent"
)

// TypeCard is the Type of a [Card]: the "type" of the side message's JSON.
const TypeCard = "card"

// Bounds of a card.
const (
	// MaxFields is the largest number of fields of a card.
	MaxFields = 50
	// MaxImageURL is the longest image URL of a card, in bytes (a data: URL
	// holds the whole image).
	MaxImageURL = 1 << 20
)

// Card is the side message of a show_card call: what a front end shows.
// Its JSON, in the side chunk, is
//
//	{"type":"card","title":"Paris","body":"Sunny all week.",
//	 "image_url":"https://example.com/paris.jpg",
//	 "fields":[{"name":"High","value":"24 °C"}]}
//
// Title is never empty; body, image_url and fields are left out when empty.
// ImageURL is an http or https URL, or a data:image/... URL (not SVG):
// anything else, such as javascript:, is refused before a card is shown.
// A front end shows the strings as text, never as HTML.
type Card struct {
	// Type is always [TypeCard].
	Type string `json:"type"`
	// Title is the card's title.
	Title string `json:"title"`
	// Body is the card's text.
	Body string `json:"body,omitempty"`
	// ImageURL is an image to show on the card.
	ImageURL string `json:"image_url,omitempty"`
	// Fields are name and value pairs, in order.
	Fields []Field `json:"fields,omitempty"`
}

// Field is one name and value pair of a [Card].
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

var cardSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"title":     map[string]any{"type": "string", "description": "Card title."},
		"body":      map[string]any{"type": "string", "description": "Card text."},
		"image_url": map[string]any{"type": "string", "description": "Optional image: an http or https URL."},
		"fields": map[string]any{
			"type":        "array",
			"description": "Optional name and value pairs shown on the card.",
			"maxItems":    MaxFields,
			"items": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":  map[string]any{"type": "string"},
					"value": map[string]any{"type": "string"},
				},
				"required":             []string{"name", "value"},
				"additionalProperties": false,
			},
		},
	},
	"required":             []string{"title", "body"},
	"additionalProperties": false,
}

// parseCard decodes and checks show_card's arguments.
func parseCard(raw json.RawMessage) (Card, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var c Card
	var a struct {
		Title    string  `json:"title"`
		Body     string  `json:"body"`
		ImageURL string  `json:"image_url"`
		Fields   []Field `json:"fields"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return c, fmt.Errorf("invalid arguments: %w", err)
	}
	if strings.TrimSpace(a.Title) == "" {
		return c, errors.New("title is required")
	}
	if len(a.Fields) > MaxFields {
		return c, fmt.Errorf("%d fields, at most %d", len(a.Fields), MaxFields)
	}
	if a.ImageURL != "" {
		if err := checkImageURL(a.ImageURL); err != nil {
			return c, err
		}
	}
	return Card{Type: TypeCard, Title: a.Title, Body: a.Body, ImageURL: a.ImageURL, Fields: a.Fields}, nil
}

// checkImageURL accepts an http or https URL with a host, or a data: URL of
// an image other than SVG (which can carry script).
func checkImageURL(s string) error {
	refuse := func(why string) error {
		return fmt.Errorf("image_url %q refused: %s", describe(s), why)
	}
	if len(s) > MaxImageURL {
		return refuse(fmt.Sprintf("longer than %d bytes", MaxImageURL))
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return refuse("it contains white space or control characters")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return refuse("not a URL")
	}
	switch u.Scheme { // url.Parse lower-cases the scheme
	case "http", "https":
		if u.Host == "" {
			return refuse("no host")
		}
		return nil
	case "data":
		mediaType, _, _ := strings.Cut(strings.ToLower(u.Opaque), ",")
		mediaType, _, _ = strings.Cut(mediaType, ";")
		if !strings.HasPrefix(mediaType, "image/") || mediaType == "image/" {
			return refuse("a data: URL must hold an image")
		}
		if strings.HasPrefix(mediaType, "image/svg") {
			return refuse("SVG images can carry script")
		}
		return nil
	}
	return refuse("only http, https and data:image URLs are shown")
}

// ShowCard returns the show_card tool: a silent display of a card with a
// title, a body, and optionally an image and name and value fields:
//
//	{"title":"Paris","body":"Sunny all week.","image_url":"https://example.com/paris.jpg","fields":[{"name":"High","value":"24 °C"}]}
//
// It skips approval, since it changes nothing. Its side message is the
// [Card] (the side chunk's Side holds the Card value), yielded right after
// the call's executing chunk; the call returns at once, telling the model
// that the card was shown. Arguments that do not make a card (no title, an
// image URL that is not http, https or a data: image) show none and are an
// error for the model.
func ShowCard() agent.Tool { return cardTool{} }

type cardTool struct{}

func (cardTool) Definition() agent.ToolDefinition {
	return agent.ToolDefinition{
		Name:         "show_card",
		Description:  "Show the user a card with a title and a body, optionally an image and name/value fields. Changes nothing.",
		Parameters:   cardSchema,
		SkipApproval: true,
	}
}

// SideMessage returns the card.
func (cardTool) SideMessage(_ context.Context, call agent.ToolCall) (any, error) {
	c, err := parseCard(call.Arguments)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Execute confirms the card.
func (cardTool) Execute(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
	c, err := parseCard(args)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("card %q shown to the user", c.Title), nil
}
