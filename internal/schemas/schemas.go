// Package schemas compiles the JSON schemas that come with tools (their
// parameters, an MCP tool's output) for validation, whole: no reference is
// loaded from anywhere, so a schema cannot make the process fetch a URL or
// read a file.
package schemas

import (
	"bytes"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles the schema doc, JSON text, under the name loc (a URN
// naming what the schema is for, seen in its errors). A reference to any
// other document is an error.
func Compile(doc []byte, loc string) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// noLoader refuses every reference to a document outside the schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: a tool's schema cannot refer to other documents", url)
}
