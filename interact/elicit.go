package interact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/planround/planround/internal/schemas"
)

// TypeElicitationRequest is the Type of an [ElicitationRequest]: the "type"
// of the side message's JSON.
const TypeElicitationRequest = "elicitation_request"

// The modes of an elicitation.
const (
	// ModeForm asks the user to fill in fields.
	ModeForm = "form"
	// ModeURL asks the user to open a URL (where the server collects what
	// must not pass through the client, such as a secret).
	ModeURL = "url"
)

// The actions of an [ElicitationAnswer].
const (
	ActionAccept  = "accept"  // the user gave what was asked (or, in URL mode, consented)
	ActionDecline = "decline" // the user said no
	ActionCancel  = "cancel"  // the user dismissed it without choosing (also a timeout)
)

// Bounds of an elicitation.
const (
	// MaxElicitFields is the largest number of fields of an elicitation form.
	MaxElicitFields = 20
	// MaxSchemaBytes is the largest requested schema, in bytes of JSON.
	MaxSchemaBytes = 64 << 10
)

// ElicitationRequest is what an MCP server asks the user for in the middle
// of a tool call (see mcpclient), as an [Asker]'s Elicit takes it and as
// the side chunk shows it:
//
//	{"type":"elicitation_request","form_id":"5f0c…","server":"github","mode":"form",
//	 "message":"Which repository?","fields":[{"name":"repo","type":"string","required":true}],
//	 "schema":{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}}
//	{"type":"elicitation_request","form_id":"9a1b…","server":"pay","mode":"url",
//	 "message":"Link your account","url":"https://pay.example/link?x=1","host":"pay.example"}
//
// A front end shows who asks (Server) and the message; in form mode the
// fields, and answers with Accept and the content, Decline or Cancel; in
// URL mode the host, and opens the URL only once the user consented
// (Accept). It answers (runner.Runner.Answer) with an action and, to
// accept a form, the content.
type ElicitationRequest struct {
	// Type is always [TypeElicitationRequest]; Elicit sets it.
	Type string `json:"type"`
	// FormID is the id to answer with; Elicit sets it.
	FormID string `json:"form_id"`
	// Server names the server that asks.
	Server string `json:"server"`
	// Mode is [ModeForm] or [ModeURL]; empty means ModeForm.
	Mode string `json:"mode"`
	// Message says what is asked and why, in the server's words.
	Message string `json:"message"`
	// Fields are the form's fields, from Schema; Elicit sets them.
	Fields []ElicitField `json:"fields,omitempty"`
	// Schema is the requested schema (form mode): an object whose
	// properties are strings, numbers, integers, booleans, or arrays of
	// strings from a list, as the MCP specification allows. The content
	// of an accepting answer must be valid against it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// URL is what the user is asked to open (URL mode), http or https, at
	// most [MaxURLBytes]. Elicit shows it all in ASCII: its host as Host
	// is, the rest with what is beyond ASCII percent-escaped (as a browser
	// sends it), so that the link shown is the link that opens and no
	// character in it reads as another.
	URL string `json:"url,omitempty"`
	// Host is URL's host, which a front end shows before asking for
	// consent; Elicit sets it. It is in ASCII: an international name as
	// punycode ("xn--pple-43d.com" for "аpple.com" with a Cyrillic а), as
	// browsers show a name that could pass for another. A host with a
	// character a person cannot see (a zero-width or direction-changing
	// one) is refused.
	Host string `json:"host,omitempty"`
	// Ref names the request within its call: the same in every turn that
	// runs the call again (a resumed one), so that the answer given before
	// is reused (an MCP input request's id, say). Empty means the message,
	// mode, schema and URL name it.
	Ref string `json:"-"`
}

// AwaitsPerson reports true: the call that shows it waits for a person.
func (ElicitationRequest) AwaitsPerson() bool { return true }

// ElicitField is one field of an elicitation form.
type ElicitField struct {
	// Name is the property's name in the content.
	Name string `json:"name"`
	// Title and Description are the server's words about it.
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Type is "string", "number", "integer", "boolean", or "array" for a
	// choice of several Options.
	Type string `json:"type"`
	// Format is a string's format: "email", "uri", "date" or "date-time";
	// empty for free text.
	Format string `json:"format,omitempty"`
	// Options are the values to choose from (a string from a list, or an
	// array's items), and Labels their titles when the server gave them.
	Options []string `json:"options,omitempty"`
	Labels  []string `json:"labels,omitempty"`
	// Required says that an accepting answer must have it.
	Required bool `json:"required,omitempty"`
	// Default is the server's default value, if any.
	Default any `json:"default,omitempty"`
}

// ElicitationAnswer is the user's answer to an elicitation.
type ElicitationAnswer struct {
	// Action is [ActionAccept], [ActionDecline] or [ActionCancel].
	Action string `json:"action"`
	// Content is what the user entered, when a form is accepted: valid
	// against the requested schema.
	Content map[string]any `json:"content,omitempty"`
}

// ErrSecretField is wrapped by the error of [PrepareElicitation] (and so of
// an Asker's Elicit) for a form that
// asks for what looks like a secret: the MCP specification says a server
// must ask for those in URL mode, and the client does not collect them.
//
// A field looks like one when its name or title names a password (also
// passwd, passphrase, passcode, and Passwort, Kennwort, mot de passe,
// contraseña and a few other languages' words), a token (an API, access,
// auth, GitHub… token: any word ending in "token"), a secret (a client
// secret), a key (an API, private, secret, access, signing, SSH or license
// key), a PIN, a one-time, verification, security, 2FA or recovery code
// (OTP, TOTP), a credential, a credit card or card number, a CVV or CVC,
// an SSN, a seed phrase. The words are read as a person reads them: in
// any case, written together or apart ("apiToken", "api_token",
// "API token"), with marks, zero-width, no-break and other invisible
// characters and look-alike letters (Cyrillic, Greek, fullwidth) taken as
// the Latin letters they look like; and as words, so that "spinach",
// "opinion" or "tokenizer" name none.
var ErrSecretField = errors.New("interact: a form must not ask for a secret")

// PrepareElicitation checks req, a server's request for input, and
// completes it for showing: its type and mode, its fields (form mode, from
// the requested schema), its host (URL mode). It fails, showing nothing,
// for a request that makes no form (wrapping [ErrInvalidForm]) or that asks
// for a secret in a form ([ErrSecretField]). An [Asker]'s Elicit shows what
// it returns.
func PrepareElicitation(req ElicitationRequest) (ElicitationRequest, error) {
	req.Type, req.FormID = TypeElicitationRequest, ""
	req.Mode = cmp.Or(req.Mode, ModeForm)
	switch req.Mode {
	case ModeForm:
		fields, err := FieldsOf(req.Schema)
		if err != nil {
			return req, err
		}
		for _, f := range fields {
			if looksSecret(f) {
				return req, fmt.Errorf("%w: field %q (secrets go through URL mode)", ErrSecretField, describe(f.Name))
			}
		}
		req.Fields, req.URL, req.Host = fields, "", ""
		var compact bytes.Buffer
		if err := json.Compact(&compact, req.Schema); err != nil {
			return req, fmt.Errorf("%w: %v", ErrInvalidForm, err)
		}
		req.Schema = compact.Bytes()
	case ModeURL:
		link, host, err := checkLink(req.URL)
		if err != nil {
			return req, err
		}
		req.URL, req.Host, req.Fields, req.Schema = link, host, nil, nil
	default:
		return req, fmt.Errorf("%w: unknown elicitation mode %q", ErrInvalidForm, describe(req.Mode))
	}
	return req, nil
}

// FieldsOf returns the fields of a requested schema: an object whose
// properties are of the primitive types the MCP specification allows. It
// fails, wrapping [ErrInvalidForm], for anything else (nested objects,
// references, more than [MaxElicitFields] properties).
func FieldsOf(schema json.RawMessage) ([]ElicitField, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: requested schema: %s", ErrInvalidForm, fmt.Sprintf(format, args...))
	}
	if len(schema) > MaxSchemaBytes {
		return nil, bad("longer than %d bytes", MaxSchemaBytes)
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, bad("%v", err)
	}
	if s.Type != "object" {
		return nil, bad("type %q, want object", describe(s.Type))
	}
	if len(s.Properties) == 0 {
		return nil, bad("no properties")
	}
	if len(s.Properties) > MaxElicitFields {
		return nil, bad("%d properties, at most %d", len(s.Properties), MaxElicitFields)
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	// In the order of the document, as the server wrote them (a schema
	// that went through a Go map, as mcp-go's client decodes it, has its
	// properties sorted by name).
	order := propertyOrder(schema)
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(order[a], order[b]), cmp.Compare(a, b))
	})
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok {
			return nil, bad("required property %q is not defined", describe(r))
		}
	}
	fields := make([]ElicitField, 0, len(names))
	for _, name := range names {
		if name == "" || len(name) > MaxIDLen {
			return nil, bad("a property name is empty or longer than %d bytes", MaxIDLen)
		}
		f, err := fieldOf(name, s.Properties[name])
		if err != nil {
			return nil, bad("property %q: %v", describe(name), err)
		}
		f.Required = slices.Contains(s.Required, name)
		fields = append(fields, f)
	}
	return fields, nil
}

// option is one choice of a oneOf or anyOf list.
type option struct {
	Const *string `json:"const"`
	Title string  `json:"title"`
}

// prop is a property's schema, as far as a form reads it.
type prop struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Format      string   `json:"format"`
	Enum        []string `json:"enum"`
	EnumNames   []string `json:"enumNames"`
	OneOf       []option `json:"oneOf"`
	AnyOf       []option `json:"anyOf"`
	Items       *prop    `json:"items"`
	Default     any      `json:"default"`
}

func fieldOf(name string, raw json.RawMessage) (ElicitField, error) {
	var p prop
	if err := json.Unmarshal(raw, &p); err != nil {
		return ElicitField{}, err
	}
	f := ElicitField{Name: name, Title: p.Title, Description: p.Description, Type: p.Type, Default: p.Default}
	switch p.Type {
	case "string":
		switch p.Format {
		case "", "email", "uri", "date", "date-time":
			f.Format = p.Format
		default:
			return ElicitField{}, fmt.Errorf("unknown string format %q", describe(p.Format))
		}
		opts, labels, err := choices(p)
		if err != nil {
			return ElicitField{}, err
		}
		f.Options, f.Labels = opts, labels
	case "number", "integer", "boolean":
	case "array":
		if p.Items == nil {
			return ElicitField{}, errors.New("an array without items")
		}
		opts, labels, err := choices(*p.Items)
		if err != nil {
			return ElicitField{}, err
		}
		if len(opts) == 0 {
			return ElicitField{}, errors.New("an array whose items are not a list of strings")
		}
		f.Options, f.Labels = opts, labels
	default:
		return ElicitField{}, fmt.Errorf("type %q is not one a form asks for", describe(p.Type))
	}
	return f, nil
}

// choices returns the options of a string property and their labels.
func choices(p prop) (opts, labels []string, err error) {
	list := p.OneOf
	if len(list) == 0 {
		list = p.AnyOf
	}
	switch {
	case len(p.Enum) > 0:
		opts = p.Enum
		if len(p.EnumNames) == len(p.Enum) {
			labels = p.EnumNames
		}
	case len(list) > 0:
		for _, o := range list {
			if o.Const == nil {
				return nil, nil, errors.New("a choice without const")
			}
			opts = append(opts, *o.Const)
			labels = append(labels, cmp.Or(o.Title, *o.Const))
		}
	default:
		return nil, nil, nil
	}
	if len(opts) > MaxOptions {
		return nil, nil, fmt.Errorf("%d options, at most %d", len(opts), MaxOptions)
	}
	seen := make(map[string]bool, len(opts))
	for _, o := range opts {
		if seen[o] {
			return nil, nil, fmt.Errorf("option %q given twice", describe(o))
		}
		seen[o] = true
	}
	return slices.Clone(opts), slices.Clone(labels), nil
}

// propertyOrder returns the position of each key of the schema's
// "properties" object in the document.
func propertyOrder(schema json.RawMessage) map[string]int {
	order := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(schema))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return order
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return order
		}
		if key, _ := t.(string); key != "properties" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return order
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return order
		}
		for i := 0; dec.More(); i++ {
			t, err := dec.Token()
			if err != nil {
				return order
			}
			key, _ := t.(string)
			if _, ok := order[key]; !ok {
				order[key] = i
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return order
			}
		}
		return order
	}
	return order
}

// CheckElicitationAnswer validates ans, an answer to the elicitation req
// (as PrepareElicitation returned it), and returns it as it is passed on:
// an action, and to accept a form, content valid against the requested
// schema, with no field it does not have; a decline or a cancel carries
// nothing typed. It fails, wrapping [ErrInvalidAnswers], for an answer that
// does not fit. An [Asker] checks the answers it takes with it.
func CheckElicitationAnswer(req ElicitationRequest, ans ElicitationAnswer) (ElicitationAnswer, error) {
	return checkElicitation(req, &ans)
}

// checkElicitation is CheckElicitationAnswer for an answer that may be
// missing (nil).
func checkElicitation(req ElicitationRequest, ans *ElicitationAnswer) (ElicitationAnswer, error) {
	if ans == nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: an elicitation is answered with an action (accept, decline or cancel)", ErrInvalidAnswers)
	}
	switch ans.Action {
	case ActionDecline, ActionCancel:
		return ElicitationAnswer{Action: ans.Action}, nil // what was typed is not passed on
	case ActionAccept:
	default:
		return ElicitationAnswer{}, fmt.Errorf("%w: action %q, want accept, decline or cancel", ErrInvalidAnswers, describe(ans.Action))
	}
	if req.Mode == ModeURL {
		return ElicitationAnswer{Action: ActionAccept}, nil
	}
	if ans.Content == nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: accepting a form needs its content", ErrInvalidAnswers)
	}
	s, err := schemas.Compile(req.Schema, "urn:planround:elicitation")
	if err != nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: the requested schema: %v", ErrInvalidAnswers, err)
	}
	// Validate the content as JSON decodes it (numbers as json.Number).
	raw, err := json.Marshal(ans.Content)
	if err != nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: %v", ErrInvalidAnswers, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: %v", ErrInvalidAnswers, err)
	}
	if err := s.Validate(v); err != nil {
		return ElicitationAnswer{}, fmt.Errorf("%w: the content does not fit the requested schema: %s", ErrInvalidAnswers, validationText(err))
	}
	known := make(map[string]bool, len(req.Fields))
	for _, fl := range req.Fields {
		known[fl.Name] = true
	}
	for k := range ans.Content {
		if !known[k] {
			return ElicitationAnswer{}, fmt.Errorf("%w: no field is named %q", ErrInvalidAnswers, describe(k))
		}
	}
	return ElicitationAnswer{Action: ActionAccept, Content: ans.Content}, nil
}

// validationText is a validation error in one line, without the schema's
// location.
func validationText(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if i := strings.Index(s, "jsonschema validation failed with "); i >= 0 {
		s = s[i+len("jsonschema validation failed with "):]
	}
	if i := strings.Index(s, " - at "); i >= 0 {
		s = s[i+3:]
	}
	return describeLong(s)
}

// describeLong shortens s for an error message, more generously than
// describe.
func describeLong(s string) string {
	const limit = 300
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
