package stream

import (
	"strings"
	"testing"
)

func TestAccumulator(t *testing.T) {
	const gen = "<generated>"
	tests := []struct {
		name    string
		deltas  []ToolCallDelta
		want    []Call // ID gen means a generated id
		started []int  // slots reported as started, in order
	}{
		{
			name: "openai split arguments, parallel",
			deltas: []ToolCallDelta{
				{Index: 0, ID: "a", Name: "f", Arguments: ""}, {Index: 0, Arguments: `{"x"`}, {Index: 0, Arguments: `:1}`},
				{Index: 1, ID: "b", Name: "g", Arguments: `{}`},
			},
			want:    []Call{{0, "a", "f", `{"x":1}`}, {1, "b", "g", `{}`}},
			started: []int{0, 1},
		},
		{
			name:    "index starts at 1",
			deltas:  []ToolCallDelta{{Index: 1, ID: "t", Name: "read"}, {Index: 1, Arguments: `{"p":1}`}},
			want:    []Call{{1, "t", "read", `{"p":1}`}},
			started: []int{0},
		},
		{
			name:    "interleaved indexes keep first-appearance order",
			deltas:  []ToolCallDelta{{Index: 5, ID: "x", Name: "a"}, {Index: 2, ID: "y", Name: "b"}, {Index: 5, Arguments: "1"}, {Index: 2, Arguments: "2"}},
			want:    []Call{{5, "x", "a", "1"}, {2, "y", "b", "2"}},
			started: []int{0, 1},
		},
		{
			name:    "no index, new id starts a new call",
			deltas:  []ToolCallDelta{{Index: NoIndex, ID: "m1", Name: "a", Arguments: "{"}, {Index: NoIndex, Arguments: "}"}, {Index: NoIndex, ID: "m2", Name: "b", Arguments: "{}"}, {Index: NoIndex, ID: "m2", Arguments: ""}},
			want:    []Call{{NoIndex, "m1", "a", "{}"}, {NoIndex, "m2", "b", "{}"}},
			started: []int{0, 1},
		},
		{
			name:    "index -1 is no index",
			deltas:  []ToolCallDelta{{Index: -1, ID: "q", Name: "a", Arguments: "{"}, {Index: -1, Arguments: "}"}},
			want:    []Call{{NoIndex, "q", "a", "{}"}},
			started: []int{0},
		},
		{
			name:    "id on every fragment, empty id and empty name on continuations",
			deltas:  []ToolCallDelta{{Index: 0, ID: "c", Name: "w"}, {Index: 0, ID: "c", Arguments: "{"}, {Index: 0, ID: "", Name: "", Arguments: "}"}},
			want:    []Call{{0, "c", "w", "{}"}},
			started: []int{0},
		},
		{
			// Ollama numbers every parallel call 0 (ollama/ollama#15457).
			name: "same index, new id starts a new call",
			deltas: []ToolCallDelta{
				{Index: 0, ID: "a", Name: "w", Arguments: `{"city":`}, {Index: 0, Arguments: `"Paris"}`},
				{Index: 0, ID: "b", Name: "w", Arguments: `{"city":`}, {Index: 0, ID: "b", Arguments: `"Rome"}`},
				{Index: 0, ID: "c", Name: "t", Arguments: `{}`},
			},
			want:    []Call{{0, "a", "w", `{"city":"Paris"}`}, {0, "b", "w", `{"city":"Rome"}`}, {0, "c", "t", `{}`}},
			started: []int{0, 1, 2},
		},
		{
			name:    "interleaved with gaps, continuations go to the latest call of the index",
			deltas:  []ToolCallDelta{{Index: 2, ID: "x", Name: "a"}, {Index: 7, ID: "y", Name: "b"}, {Index: 2, Arguments: "1"}, {Index: 2, ID: "z", Name: "c"}, {Index: 7, Arguments: "2"}, {Index: 2, Arguments: "3"}},
			want:    []Call{{2, "x", "a", "1"}, {7, "y", "b", "2"}, {2, "z", "c", "3"}},
			started: []int{0, 1, 2},
		},
		{
			name:    "a late id does not replace a generated one",
			deltas:  []ToolCallDelta{{Index: 0, Name: "w"}, {Index: 0, ID: "late", Arguments: "{}"}},
			want:    []Call{{0, gen, "w", "{}"}},
			started: []int{0},
		},
		{
			name:    "no id gets a generated one",
			deltas:  []ToolCallDelta{{Index: 0, Name: "w", Arguments: "{}"}},
			want:    []Call{{0, gen, "w", "{}"}},
			started: []int{0},
		},
		{
			name:    "name arrives late",
			deltas:  []ToolCallDelta{{Index: 0, ID: "c"}, {Index: 0, Name: "late", Arguments: "{}"}},
			want:    []Call{{0, "c", "late", "{}"}},
			started: []int{0},
		},
		{
			name: "an id already taken by an earlier call gets a generated one; fragments still match it",
			deltas: []ToolCallDelta{
				{Index: 0, ID: "dup", Name: "a", Arguments: "{"}, {Index: 1, ID: "dup", Name: "b", Arguments: "["},
				{Index: 1, ID: "dup", Arguments: "]"}, {Index: 0, ID: "dup", Arguments: "}"},
			},
			want:    []Call{{0, "dup", "a", "{}"}, {1, gen, "b", "[]"}},
			started: []int{0, 1},
		},
		{
			name: "no index: a taken id is replaced and later fragments with it continue the call",
			deltas: []ToolCallDelta{
				{Index: NoIndex, ID: "m", Name: "a", Arguments: "{}"}, {Index: NoIndex, ID: "n", Name: "b", Arguments: "{"},
				{Index: NoIndex, ID: "m", Name: "c", Arguments: "["}, {Index: NoIndex, ID: "m", Arguments: "]"},
			},
			want:    []Call{{NoIndex, "m", "a", "{}"}, {NoIndex, "n", "b", "{"}, {NoIndex, gen, "c", "[]"}},
			started: []int{0, 1, 2},
		},
		{
			name: "no index: interleaved fragments are matched by id against every call",
			deltas: []ToolCallDelta{
				{Index: NoIndex, ID: "a", Name: "f"}, {Index: NoIndex, ID: "b", Name: "g"},
				{Index: NoIndex, ID: "a", Arguments: `{"x":`}, {Index: NoIndex, ID: "b", Arguments: `{"y":`},
				{Index: NoIndex, ID: "a", Arguments: `1}`}, {Index: NoIndex, ID: "b", Arguments: `2}`},
			},
			want:    []Call{{NoIndex, "a", "f", `{"x":1}`}, {NoIndex, "b", "g", `{"y":2}`}},
			started: []int{0, 1},
		},
		{
			name: "no index, no id: two whole calls stay two calls",
			deltas: []ToolCallDelta{
				{Index: NoIndex, Name: "w", Arguments: `{"city":"Paris"}`},
				{Index: NoIndex, Name: "w", Arguments: `{"city":"Rome"}`},
				{Index: NoIndex, Name: "t", Arguments: `{}`},
			},
			want:    []Call{{NoIndex, gen, "w", `{"city":"Paris"}`}, {NoIndex, gen, "w", `{"city":"Rome"}`}, {NoIndex, gen, "t", `{}`}},
			started: []int{0, 1, 2},
		},
		{
			name: "no index, no id: a named header then nameless arguments, twice",
			deltas: []ToolCallDelta{
				{Index: NoIndex, Name: "w"}, {Index: NoIndex, Arguments: `{"n":`}, {Index: NoIndex, Arguments: `1}`},
				{Index: NoIndex, Name: "w"}, {Index: NoIndex, Arguments: `{"n":2}`},
			},
			want:    []Call{{NoIndex, gen, "w", `{"n":1}`}, {NoIndex, gen, "w", `{"n":2}`}},
			started: []int{0, 1},
		},
		{
			name: "no index: the id and the same name on every fragment continue the call",
			deltas: []ToolCallDelta{
				{Index: NoIndex, ID: "m", Name: "w", Arguments: `{"city":`}, {Index: NoIndex, ID: "m", Name: "w", Arguments: `"Oslo"}`},
			},
			want:    []Call{{NoIndex, "m", "w", `{"city":"Oslo"}`}},
			started: []int{0},
		},
		{
			name:   "never named",
			deltas: []ToolCallDelta{{Index: 0, ID: "c", Arguments: "{}"}},
			want:   []Call{{0, "c", "", "{}"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Accumulator
			var started []int
			for _, d := range tt.deltas {
				slot, s := a.Add(d)
				if s {
					started = append(started, slot)
					if a.Call(slot).Name == "" {
						t.Errorf("started reported for slot %d without a name", slot)
					}
				}
			}
			got := a.Calls()
			if len(got) != len(tt.want) || a.Len() != len(tt.want) {
				t.Fatalf("calls = %+v (Len %d), want %+v", got, a.Len(), tt.want)
			}
			for i, c := range got {
				w := tt.want[i]
				if w.ID == gen {
					if !strings.HasPrefix(c.ID, "call_") || len(c.ID) != len("call_")+24 {
						t.Errorf("call %d id = %q, want a generated call_<24 hex>", i, c.ID)
					}
					w.ID = c.ID
				}
				if c != w {
					t.Errorf("call %d = %+v, want %+v", i, c, w)
				}
			}
			if !equalInts(started, tt.started) {
				t.Errorf("started slots = %v, want %v", started, tt.started)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAccumulatorResetAndBounds(t *testing.T) {
	var a Accumulator
	if a.Calls() != nil || a.Len() != 0 {
		t.Fatalf("zero Accumulator: Calls %v Len %d, want nil, 0", a.Calls(), a.Len())
	}
	if c := a.Call(3); c != (Call{}) {
		t.Errorf("Call(3) on empty = %+v, want zero Call", c)
	}
	a.Add(ToolCallDelta{Index: 0, ID: "a", Name: "f", Arguments: "{}"})
	kept := a.Call(0)
	a.Reset()
	if a.Len() != 0 || a.Call(0) != (Call{}) || a.Call(-1) != (Call{}) {
		t.Errorf("after Reset: Len %d, Call(0) %+v", a.Len(), a.Call(0))
	}
	a.Add(ToolCallDelta{Index: 0, ID: "b", Name: "g", Arguments: "[1]"})
	if got := a.Call(0); got != (Call{0, "b", "g", "[1]"}) {
		t.Errorf("reused slot = %+v, want {0 b g [1]}", got)
	}
	if kept != (Call{0, "a", "f", "{}"}) {
		t.Errorf("a Call taken before Reset changed: %+v", kept)
	}
	if id1, id2 := newCallID(), newCallID(); id1 == id2 {
		t.Errorf("newCallID twice = %q", id1)
	}
}
