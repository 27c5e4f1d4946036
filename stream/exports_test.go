package stream

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/planround/planround/intent"
)

// TestDefaultTagsAreTheDefaultIntents: the tags a zero Config strips are
// the voice tag and those of the default intent dictionary, so a parser
// hides what the agent hides by default.
func TestDefaultTagsAreTheDefaultIntents(t *testing.T) {
	want := append([]string{VoiceTag}, intent.DefaultDictionary().Tags()...)
	if !slices.Equal(defaultTags, want) {
		t.Errorf("defaultTags = %q, want %q", defaultTags, want)
	}
	_, pieces := collect(Config{}, "<voice>Hi <need_", "tool> there<no_tool>")
	var shown strings.Builder
	for _, pc := range pieces {
		shown.WriteString(pc.Text)
	}
	if shown.String() != "Hi  there" {
		t.Errorf("the zero Config shows %q", shown.String())
	}
}

// TestNoExportedVariables: the package exports no variable, so no caller
// can change what every parser does.
func TestNoExportedVariables(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.IsExported() {
						t.Errorf("%s: exported variable %s", fset.Position(id.Pos()), id.Name)
					}
				}
			}
		}
	}
}
