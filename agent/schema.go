package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	gschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planround/planround/internal/schemas"
)

// schemaFor returns the JSON schema of the arguments object of a tool whose
// arguments decode into Args. It is the schema jsonschema-go infers from the
// type (json tags name the properties, a jsonschema tag is a property's
// description, unknown properties are refused), with two changes: a pointer
// field is optional, as an omitempty one is, and an object always lists its
// properties (a struct without fields is an empty object), which some
// providers require.
func schemaFor[Args any]() (map[string]any, error) {
	t := reflect.TypeFor[Args]()
	s, err := gschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s.Type != "object" && !slices.Contains(s.Types, "object") {
		return nil, fmt.Errorf("the arguments are a JSON object, so Args must be a struct or a map with string keys, not %v", t)
	}
	// A *Struct argument is never null: the arguments are always an object.
	s.Type, s.Types = "object", nil
	optionalPointers(t, s)
	if s.Properties == nil {
		s.Properties = map[string]*gschema.Schema{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// optionalPointers removes the pointer fields of t, and of the structs t
// holds, from the required properties of s, t's inferred schema.
func optionalPointers(t reflect.Type, s *gschema.Schema) {
	if s == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		optionalPointers(t.Elem(), s.Items)
	case reflect.Map:
		optionalPointers(t.Elem(), s.AdditionalProperties)
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() || f.Anonymous {
				continue
			}
			name := jsonName(f)
			p := s.Properties[name]
			if p == nil {
				continue
			}
			if f.Type.Kind() == reflect.Pointer {
				s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
			}
			optionalPointers(f.Type, p)
		}
	}
}

// jsonName is the property name encoding/json uses for f.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// compileSchema compiles a tool's parameters schema for validating its
// arguments. No reference is loaded from anywhere: a schema must be whole.
func compileSchema(params map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return schemas.Compile(b, "urn:planround:tool-parameters")
}

// maxSchemaErrors bounds how many problems an argument error lists.
const maxSchemaErrors = 5

// validateArgs checks args, a JSON object, against s. Its error lists the
// problems in a few words each, with where they are ("at '/city': got
// number, want string"), for the model to correct its call.
func validateArgs(s *jsonschema.Schema, args json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return err
	}
	err = s.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var problems []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		p := u.Error.String()
		if u.InstanceLocation != "" {
			p = "at '" + u.InstanceLocation + "': " + p
		}
		problems = append(problems, p)
	}
	if len(problems) == 0 {
		return errors.New("does not match the schema")
	}
	slices.Sort(problems) // the validator's order varies from call to call
	problems = slices.Compact(problems)
	if len(problems) > maxSchemaErrors {
		problems = append(problems[:maxSchemaErrors], fmt.Sprintf("and %d more", len(problems)-maxSchemaErrors))
	}
	return errors.New(strings.Join(problems, "; "))
}

// decodeArgs decodes args into an Args, refusing what the schema may allow
// but Args cannot hold: a property Args has no field for, a fraction or an
// out-of-range number for an integer field.
func decodeArgs[Args any](args json.RawMessage) (Args, error) {
	var a Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}") // as the agent reads empty arguments
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, argsDecodeError(err)
	}
	return a, nil
}

// argsDecodeError words a decoding error like a schema error, for the model.
func argsDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		msg := fmt.Sprintf("cannot use %s as %v", te.Value, te.Type)
		if te.Field != "" {
			// Field is a dotted path without array indexes, so it is
			// not given as a JSON pointer.
			msg = "field " + te.Field + ": " + msg
		}
		return errors.New(msg)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}
