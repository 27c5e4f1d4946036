package stream

import "testing"

// TestParsersShareTheirTable checks that the Parsers of one Config share
// its table, that another Config gets its own, and that changing the tags
// slice a Config was given changes no table built from it.
func TestParsersShareTheirTable(t *testing.T) {
	tags := []string{"<a>", "<b>"}
	p1 := NewParser(Config{Tags: tags})
	p2 := NewParser(Config{Tags: []string{"<a>", "<b>"}})
	if p1.table != p2.table {
		t.Error("two Parsers of the same tags built two tables")
	}
	for _, cfg := range []Config{{}, {Tags: []string{}}, {Tags: tags, Mode: ModeSentences}, {Tags: []string{"<a>"}}} {
		if p := NewParser(cfg); p.table == p1.table {
			t.Errorf("Config %+v got the table of %q", cfg, tags)
		}
	}
	d1, d2 := NewParser(Config{}), NewParser(Config{})
	if d1.table != d2.table {
		t.Error("two Parsers of the default Config built two tables")
	}

	p3 := NewParser(Config{Tags: tags})
	tags[1] = "<c>"
	if p4 := NewParser(Config{Tags: tags}); p4.table == p3.table {
		t.Error("a Config whose tags changed got the table of the old tags")
	}
	var got []Piece
	p3.Write("x<b>y", func(pc Piece) { got = append(got, pc) })
	p3.Flush(func(pc Piece) { got = append(got, pc) })
	text := ""
	for _, pc := range got {
		text += pc.Text
	}
	if text != "xy" {
		t.Errorf("a Parser of <a> and <b> made %q of x<b>y after its Config's slice changed, want xy", text)
	}
}
