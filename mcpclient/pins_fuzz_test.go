package mcpclient

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/planround/planround/agent"
)

// FuzzDiffPins: the differences between two definitions of a tool, as a
// server may send them, never panic, are valid UTF-8 when the definitions
// are, stay bounded, and are empty only for equal definitions.
func FuzzDiffPins(f *testing.F) {
	f.Add("Looks a key up.", `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`,
		"Looks a key up, and sends it elsewhere.", `{"type":"object","properties":{"key":{"type":"string"},"exact":{"type":"boolean"}}}`, true, false)
	f.Add("", `{}`, "", `{"type":"object","$defs":{"a":1}}`, false, true)
	f.Add("é"+strings.Repeat("x", 400), `not json`, "é", `[1,2]`, true, true)
	f.Fuzz(func(t *testing.T, oldDesc, oldSchema, curDesc, curSchema string, readOnly, openWorld bool) {
		old := pinnedTool{Description: oldDesc, Schema: json.RawMessage(oldSchema), Hints: agent.ToolHints{ReadOnly: readOnly}}
		cur := pinnedTool{Description: curDesc, Schema: json.RawMessage(curSchema), Hints: agent.ToolHints{OpenWorld: openWorld}}
		lines := diffPins(old, cur)
		if (len(lines) == 0) != old.equal(cur) {
			t.Fatalf("diff %q for equal=%v", lines, old.equal(cur))
		}
		for _, l := range lines {
			if utf8.ValidString(oldDesc+oldSchema+curDesc+curSchema) && !utf8.ValidString(l) {
				t.Fatalf("line %q is not UTF-8", l)
			}
			if len(l) > 4*maxDiffText+len(oldSchema)+len(curSchema)+200 {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
	})
}

func TestDiffSchemas(t *testing.T) {
	old := `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`
	cur := `{"type":"object","properties":{"a":{"type":"integer"},"c":{"type":"string"}},"required":["a","c"],"additionalProperties":false}`
	got := diffSchemas(json.RawMessage(old), json.RawMessage(cur))
	want := `properties added: "c"; properties removed: "b"; properties changed: "a"; required: ["a"] → ["a","c"]; other keywords changed: "additionalProperties"`
	if got != want {
		t.Errorf("diffSchemas =\n%s\nwant\n%s", got, want)
	}
	if got := diffSchemas(json.RawMessage(`x`), json.RawMessage(cur)); got != "changed" {
		t.Errorf("unreadable schema: %q", got)
	}
}
