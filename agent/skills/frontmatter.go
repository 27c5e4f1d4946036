package skills

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxNameLen and MaxDescriptionLen bound a skill's name and description, in
// characters, as the open skill format does: the descriptions of the
// enabled skills go into every request.
const (
	MaxNameLen        = 64
	MaxDescriptionLen = 1024
)

// frontMatter is what a SKILL.md holds: the fields of its YAML front matter
// and the Markdown body after it.
type frontMatter struct {
	name, description string
	meta              map[string]any
	body              string
}

// parseSkillFile splits a SKILL.md into its front matter and its body, and
// checks the required fields. The front matter is a YAML mapping between a
// first line "---" and the next line "---"; a UTF-8 byte order mark before
// it and CRLF line ends are accepted. The body loses its leading line ends
// and trailing white space.
func parseSkillFile(data []byte) (frontMatter, error) {
	if !utf8.Valid(data) {
		return frontMatter{}, errors.New("SKILL.md is not UTF-8 text")
	}
	text := strings.TrimPrefix(string(data), "\uFEFF")
	first, rest, _ := strings.Cut(text, "\n")
	if !isFence(first) {
		return frontMatter{}, errors.New(`SKILL.md does not start with a front matter line "---"`)
	}
	var yml, body string
	for off := 0; ; {
		line, after, more := strings.Cut(rest[off:], "\n")
		if isFence(line) {
			yml, body = rest[:off], after
			break
		}
		if !more {
			return frontMatter{}, errors.New(`SKILL.md's front matter has no closing line "---"`)
		}
		off += len(line) + 1
	}

	var m map[string]any
	if err := yaml.Unmarshal([]byte(yml), &m); err != nil {
		return frontMatter{}, fmt.Errorf("front matter is not a YAML mapping: %w", err)
	}
	name, err := field(m, "name")
	if err != nil {
		return frontMatter{}, err
	}
	if err := checkName(name); err != nil {
		return frontMatter{}, err
	}
	desc, err := field(m, "description")
	if err != nil {
		return frontMatter{}, err
	}
	desc = strings.TrimSpace(desc)
	switch n := utf8.RuneCountInString(desc); {
	case n == 0:
		return frontMatter{}, errors.New("front matter's description is empty")
	case n > MaxDescriptionLen:
		return frontMatter{}, fmt.Errorf("front matter's description has %d characters, more than %d", n, MaxDescriptionLen)
	}
	delete(m, "name")
	delete(m, "description")
	var meta map[string]any
	if len(m) > 0 {
		meta = normalize(m).(map[string]any)
	}
	body = strings.TrimRightFunc(strings.TrimLeft(body, "\r\n"), unicode.IsSpace)
	return frontMatter{name: name, description: desc, meta: meta, body: body}, nil
}

// isFence reports whether line is a front matter fence: "---", maybe
// followed by spaces and a carriage return.
func isFence(line string) bool {
	return strings.TrimRight(line, " \t\r") == "---"
}

// field returns the string value of a required front matter key.
func field(m map[string]any, key string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", fmt.Errorf("front matter has no %s", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("front matter's %s is not a string but %s", key, yamlType(v))
	}
	return s, nil
}

// checkName checks a skill's name: 1 to MaxNameLen ASCII letters, digits,
// '-', '_' and '.', starting with a letter or digit. The model writes it
// in get_skill's arguments, so it is kept plain.
func checkName(name string) error {
	if name == "" {
		return errors.New("front matter's name is empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("front matter's name has %d characters, more than %d", len(name), MaxNameLen)
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return fmt.Errorf("front matter's name %q has %q; use letters, digits, '-', '_' and '.', starting with a letter or digit", name, c)
		}
	}
	return nil
}

// normalize returns v with every YAML mapping as a map[string]any (keys
// that are not strings written as text), so that Meta marshals to JSON.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
		return v
	}
	return v
}

// yamlType names the YAML kind of a decoded value, for error messages.
func yamlType(v any) string {
	switch v.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
