package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoFixedTempPaths: the tests of this package write their files
// (screenshots) into t.ArtifactDir or t.TempDir, never to a fixed path
// under /tmp that parallel runs would share and that nobody cleans up.
func TestNoFixedTempPaths(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tmp := "/" + "tmp" // not one literal, or this file would match
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && (s == tmp || strings.HasPrefix(s, tmp+"/")) {
				t.Errorf("%s: a fixed path under /tmp: %s", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	}
}
