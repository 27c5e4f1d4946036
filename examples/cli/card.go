package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/planround/planround/interact"
)

// Bounds of a card drawn on the terminal.
const (
	maxCardWidth = 60 // columns of text inside the box
	minCardWidth = 20
	maxCardLines = 12 // lines of body text; the rest is cut
)

// card draws a show_card card as a box: its title, then its body (wrapped),
// its fields as "name: value" and its image URL as text (a data: URL by its
// type and size only):
//
//	┌──────────────────────┐
//	│ Paris                │
//	├──────────────────────┤
//	│ Sunny all week.      │
//	│ High: 24 °C          │
//	│ image: https://…     │
//	└──────────────────────┘
func (r *humanRenderer) card(c interact.Card) {
	title := wrap(oneLine(c.Title, maxCardWidth*2), maxCardWidth)
	var body []string
	if text := strings.TrimSpace(clean(c.Body)); text != "" {
		for _, para := range strings.Split(text, "\n") {
			body = append(body, wrap(strings.ReplaceAll(para, "\t", " "), maxCardWidth)...)
		}
		if len(body) > maxCardLines {
			body = append(body[:maxCardLines-1], fmt.Sprintf("… (%d more lines)", len(body)-maxCardLines+1))
		}
	}
	for _, f := range c.Fields {
		body = append(body, wrap(oneLine(f.Name, maxCardWidth)+": "+oneLine(f.Value, maxCardWidth*2), maxCardWidth)...)
	}
	if c.ImageURL != "" {
		body = append(body, truncate("image: "+imageText(c.ImageURL), maxCardWidth))
	}

	width := minCardWidth
	for _, l := range append(title[:len(title):len(title)], body...) {
		width = max(width, utf8.RuneCountInString(l))
	}
	rule := strings.Repeat("─", width+2)
	row := func(style, l string) string {
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(l))
		return r.styled(styleDim, "  │ ") + r.styled(style, l) + pad + r.styled(styleDim, " │") + "\n"
	}
	r.newline()
	r.write(r.styled(styleDim, "  ┌"+rule+"┐") + "\n")
	for _, l := range title {
		r.write(row(styleBold, l))
	}
	if len(body) > 0 {
		r.write(r.styled(styleDim, "  ├"+rule+"┤") + "\n")
		for _, l := range body {
			r.write(row("", l))
		}
	}
	r.write(r.styled(styleDim, "  └"+rule+"┘") + "\n")
}

// imageText is how a card's image URL is shown: the URL, or for a data: URL
// (which holds the whole image) its media type and size.
func imageText(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		mediaType, _, _ := strings.Cut(rest, ",")
		mediaType, _, _ = strings.Cut(mediaType, ";")
		return fmt.Sprintf("%s inline (%d bytes)", oneLine(mediaType, 40), len(u))
	}
	return oneLine(u, maxCardWidth*4)
}

// wrap cuts a line of text into lines of at most width runes, at spaces
// where it can; it returns one empty line for empty text.
func wrap(s string, width int) []string {
	var out []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		w := []rune(word)
		for len(w) > width { // a word longer than a line is cut
			if len(cur) > 0 {
				out = append(out, string(cur))
				cur = nil
			}
			out = append(out, string(w[:width]))
			w = w[width:]
		}
		switch {
		case len(cur) == 0:
			cur = w
		case len(cur)+1+len(w) <= width:
			cur = append(append(cur, ' '), w...)
		default:
			out = append(out, string(cur))
			cur = w
		}
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, string(cur))
	}
	return out
}
