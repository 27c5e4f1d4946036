package agent

import (
	"context"
	"strings"
	"testing"
)

// FuzzCheckArgs feeds arbitrary model arguments to the check a call passes
// before approval, for a typed tool with its inferred schema and for one
// with a hand-written schema: it never panics, a refusal says what is
// wrong, and arguments it lets through reach the function decoded.
func FuzzCheckArgs(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"city":"Oslo","days":3,"tags":["a"],"detail":{"step":1}}`,
		`{"city":5}`, `{"city":"a","detail":{"step":1.0}}`, `{"city":"a","detail":{"step":1e400}}`,
		`{"city":"a","detail":{"step":-9223372036854775809}}`, `{"city":"a","detail":null,"x":[{}]}`,
		`{"city":"\ud800","days":null,"detail":{"step":1,"hourly":true}}`, `{"n":2.5,"m":{"k":[1,2]}}`,
		`{"city":"a","city":"b","detail":{"step":1}}`, `{"a":{"b":{"c":{"d":[[[[]]]]}}}}`,
	} {
		f.Add(s)
	}
	type detail struct {
		Hourly *bool `json:"hourly"`
		Step   int8  `json:"step"`
	}
	type args struct {
		City   string         `json:"city"`
		Days   *uint16        `json:"days"`
		Tags   []string       `json:"tags,omitempty"`
		Detail detail         `json:"detail"`
		Extra  map[string]int `json:"extra,omitempty"`
	}
	inferred := NewTool("inferred", "", func(_ context.Context, a args, _ Progress) (string, error) {
		return "ok", nil
	})
	hand := NewTool("hand", "", func(_ context.Context, a struct {
		N int `json:"n"`
	}, _ Progress) (string, error) {
		return "ok", nil
	}, WithParameters(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}))
	reg, err := NewToolRegistry(inferred, hand)
	if err != nil {
		f.Fatal(err)
	}
	set := reg.tools()
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseArgs(s)
		if err != nil {
			return
		}
		for _, name := range []string{"inferred", "hand"} {
			reg := set.byName[name]
			if err := reg.checkArgs(a); err != nil {
				if strings.TrimSpace(err.Error()) == "" {
					t.Fatalf("%s %s: refused without saying why", name, a)
				}
				continue
			}
			out, err := reg.tool.Execute(context.Background(), a, newProgressBuffer())
			if err != nil || out != "ok" {
				t.Fatalf("%s %s: passed the check but Execute says %q, %v", name, a, out, err)
			}
		}
	})
}
