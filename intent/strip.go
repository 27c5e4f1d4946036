package intent

import (
	"bytes"
	"strings"
)

// Strip returns text with every tag of the dictionary removed, and tidies
// the whitespace the removals leave behind:
//
//   - whitespace at the end of the result is trimmed (the usual case: a
//     reply that ended with " <need_tool>" or "\n<no_tool>"), except one
//     character of it after text that would otherwise end like a tag cut
//     short ("x <need_ <no_tool>" strips to "x <need_ ");
//   - whitespace that a removed tag leaves at the very start is trimmed;
//   - where a tag stood between two runs of spaces or tabs, the second
//     run is dropped, so "a <no_tool> b" becomes "a b".
//
// Removal repeats until no tag is left, so text such as
// "<no_<need_tool>tool>" strips to the empty string: the result never
// contains a tag of the dictionary. The text is taken to be a complete
// reply, so a tag cut short at its very end (a stream that broke inside
// "<need_") is removed too, as the longest end that is a proper prefix of a
// tag, again and again: "a <no_<ne" strips to "a". This is the rule the
// stream parser follows for the text it shows: apart from whitespace, the
// parser with the dictionary's tags shows what Strip returns.
//
// A text without tags, complete or cut short at its end, is returned
// unchanged, whitespace included. Other tags, in particular the speech tag
// "<voice>", are kept. Strip runs in time linear in len(text) for a given
// dictionary.
func (d Dictionary) Strip(text string) string {
	tags := d.all()
	if !containsAny(text, tags) && cutAt(d, text) < 0 {
		return text
	}
	// buf never contains a tag: every tag is at least "<x>", so one can
	// only appear when a '>' is appended, and then it is a suffix of buf,
	// which we cut at once. Cutting leaves a prefix of an earlier buf, so
	// the invariant holds and removal reaches its fixed point in one pass.
	buf := make([]byte, 0, len(text))
	drop := false // drop whitespace left by the latest cut
	for i := 0; i < len(text); i++ {
		c := text[i]
		if drop {
			if c == ' ' || c == '\t' || (len(buf) == 0 && (c == '\n' || c == '\r')) {
				continue
			}
			drop = false
		}
		buf = append(buf, c)
		if c != '>' {
			continue
		}
		for _, t := range tags {
			if len(buf) >= len(t.Name) && string(buf[len(buf)-len(t.Name):]) == t.Name {
				buf = buf[:len(buf)-len(t.Name)]
				drop = len(buf) == 0 || isSpace(buf[len(buf)-1])
				break // no other tag can end here: tags never overlap
			}
		}
	}
	for {
		j := cutAt(d, buf)
		if j < 0 {
			break
		}
		buf = buf[:j]
	}
	out := bytes.TrimRight(buf, " \t\r\n")
	if len(out) < len(buf) && cutAt(d, out) >= 0 {
		// The white space shows that what comes before it is no tag:
		// one character of it stays, so the result does not end in what
		// looks like a tag cut short.
		out = buf[:len(out)+1]
	}
	return string(out)
}

// cutAt returns where a tag cut short at the end of b starts, or -1: a
// proper prefix of a tag holds no '<' but its first byte and no '>', so the
// only candidate is the suffix from the last '<'.
func cutAt[T string | []byte](d Dictionary, b T) int {
	j := len(b) - 1
	for j >= 0 && b[j] != '<' {
		j--
	}
	if j < 0 {
		return -1
	}
	for _, t := range d.all() {
		if rest := b[j:]; len(rest) < len(t.Name) && t.Name[:len(rest)] == string(rest) {
			return j
		}
	}
	return -1
}

func containsAny(text string, tags []Tag) bool {
	for _, t := range tags {
		if strings.Contains(text, t.Name) {
			return true
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
