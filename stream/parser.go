package stream

import (
	"bytes"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Mode selects how a [Parser] cuts visible text into pieces.
type Mode uint8

const (
	// ModeDeltas forwards text as soon as it cannot be part of a control
	// tag: usually one piece per delta.
	ModeDeltas Mode = iota
	// ModeSentences forwards whole sentences, for speech synthesis. A
	// sentence ends after a CJK 。！？, after a Latin . ! or ? that is
	// followed by white space (the white space character is kept with the
	// sentence), and after a newline. The remainder comes out at Flush.
	ModeSentences
)

// VoiceTag is the control tag that, at the start of a reply, flags the reply
// for speech.
const VoiceTag = "<voice>"

// defaultTags are the control tags a [Parser] strips when [Config.Tags] is
// nil: the voice tag and the tags of the default intent dictionary (a test
// holds them equal).
var defaultTags = []string{VoiceTag, "<no_tool>", "<need_tool>"}

// Config configures a [Parser]. The zero Config strips <voice>, <no_tool>
// and <need_tool> in [ModeDeltas].
type Config struct {
	// Tags are the control tags to strip from the visible text. nil means
	// [VoiceTag] and the default intent tags, <no_tool> and <need_tool>;
	// an empty non-nil slice strips nothing. Empty strings are ignored.
	// The voice flag works only when VoiceTag is among the tags. An agent
	// strips the voice tag and its own intent tags.
	Tags []string
	// Mode is how visible text is cut into pieces.
	Mode Mode
}

// Piece is one span of a reply as the [Parser] releases it.
//
// Text is Raw with the control tags removed. It may be empty when the span
// holds only tags; callers that show text skip such pieces, but callers that
// rebuild the raw reply must keep them. The concatenation of all pieces'
// Raw is the whole reply; the concatenation of their Text is the reply
// without its tags (see [Parser] for the rule).
//
// The strings are ordinary immutable strings that stay valid after the
// Parser moves on or is Reset. A piece that lies within one delta is a
// substring of the string passed to Write (no copy); a piece that spans
// deltas (held-back text, a sentence) is one new string.
type Piece struct {
	// Text is the visible text: Raw without control tags.
	Text string
	// Raw is the same span with its control tags.
	Raw string
	// Voice is true when the reply began with VoiceTag.
	Voice bool
}

// byte classes used by the scanner.
const (
	classTag    = 1 << iota // may start a control tag
	classSplit              // may end a sentence (., !, ?, \n, lead byte of 。！？)
	classPrefix             // may end a proper prefix of a control tag
)

// Parser turns the content deltas of one streamed reply into [Piece]s:
// control tags are stripped from the visible text without ever leaking a
// partial tag, the reply's voice flag is decided at its start, and in
// [ModeSentences] the text is cut at sentence ends.
//
// The Parser holds back only what it must: a suffix that could still grow
// into a tag (with the text before it that would close up into a tag when
// it is removed), the first bytes of a rune cut by the end of a delta (so that
// no piece of a valid UTF-8 reply holds half a rune), the very beginning of the reply until the voice flag is known
// (leading white space and non-voice tags), and in ModeSentences the
// unfinished sentence. Everything held back comes out at [Parser.Flush].
//
// A tag is recognised wherever it occurs, leftmost first; when several tags
// match at the same place, the longest wins. Removal goes on to a fixed
// point: the text that closes up around a removed tag is read again, so
// "<no_<need_tool>tool>" hides both tags, and no tag is ever visible. The
// visible text is what removing the leftmost tag again and again leaves.
// Text that only looks like the start of a tag ("a < b", "<div>",
// "<no_toolbox") is released as soon as it can no longer become one.
//
// At [Parser.Flush] the reply is complete: a tag cut short at its very end
// (a stream that broke or was interrupted inside "<need_") is not shown
// either. The longest end of the visible text that is a proper prefix of a
// tag is removed, again and again, so "a <no_<ne" shows "a ". Such text
// stays in Raw.
//
// Sentence ends are found from the raw text: a Latin . ! ? counts only when
// the next raw character is white space or the stream ends, so "3.14",
// "e.g." inside a word and "Hi.<no_tool>" do not split, while "Dr. Smith"
// does (there is no abbreviation list). The white space goes with the
// sentence, unless it begins a tag (a configured " [t]"): the tag stays
// whole in the next piece. A '.' at the end of a delta waits for
// the next delta.
//
// A Parser is not safe for concurrent use. Reuse it for the next reply
// with [Parser.Reset].
type Parser struct {
	*table // shared with the Parsers of the same Config
	// onlyLT is true when every tag starts with '<', which lets the delta
	// mode jump from one '<' to the next.
	onlyLT   bool
	hasVoice bool
	mode     Mode

	// raw holds the whole reply. Its memory is reused after Reset: no
	// string handed out points into it.
	raw []byte
	// cur is the delta being written and curStart its offset in raw.
	// Pieces that lie within cur are sliced out of it without copying.
	cur      string
	curStart int
	// rawStr caches string(raw) for Raw while raw does not change.
	rawStr string
	// emitted is the length of raw already released in pieces.
	emitted int
	// scanned is the length of raw already classified: raw[scanned:] is
	// either unread or a held-back possible tag prefix (or, in sentence
	// mode, a '.' waiting for its next character).
	scanned int
	// spans are the removed parts of raw[emitted:]: complete tags (a span
	// that closed up around earlier ones covers them) and, at Flush, a tag
	// cut short. Absolute offsets, in order, never overlapping or touching.
	// The visible text is raw without its spans.
	spans []span
	// win and winPos hold the visible bytes before a position and their
	// offsets in raw (see window); reused.
	win    []byte
	winPos []int

	decided  bool // the voice flag is known
	voice    bool
	flushing bool // Flush is finding the last tags: release nothing
}

type span struct{ start, end int }

// table is what a Parser derives from its Config: its tags and the class
// of every byte. It is never changed once built, so that the Parsers of one
// Config share it (256 bytes and more each, of a Parser of about 200).
type table struct {
	mode     Mode
	src      []string // Config.Tags as given (nil: the default), to compare
	tags     []string
	maxTag   int // length of the longest tag
	class    [256]uint8
	onlyLT   bool
	hasVoice bool
}

// lastTable is the table most recently built: the next Parser of the same
// Config (an agent's next round) takes it instead of building its own.
var lastTable atomic.Pointer[table]

// tableOf returns the table of cfg, the last one built when it is the same.
func tableOf(cfg Config) *table {
	if t := lastTable.Load(); t != nil && t.mode == cfg.Mode && (t.src == nil) == (cfg.Tags == nil) && slices.Equal(t.src, cfg.Tags) {
		return t
	}
	t := &table{mode: cfg.Mode, src: slices.Clone(cfg.Tags), onlyLT: true}
	tags := cfg.Tags
	if tags == nil {
		tags = defaultTags
	}
	for _, tag := range tags {
		if tag == "" {
			continue
		}
		t.tags = append(t.tags, tag)
		t.maxTag = max(t.maxTag, len(tag))
		t.class[tag[0]] |= classTag
		for i := range len(tag) - 1 {
			t.class[tag[i]] |= classPrefix
		}
		if tag[0] != '<' {
			t.onlyLT = false
		}
		if tag == VoiceTag {
			t.hasVoice = true
		}
	}
	if cfg.Mode == ModeSentences {
		for _, c := range []byte{'.', '!', '?', '\n', 0xE3, 0xEF} {
			t.class[c] |= classSplit
		}
	}
	lastTable.Store(t)
	return t
}

// NewParser returns a Parser configured by cfg.
func NewParser(cfg Config) *Parser {
	t := tableOf(cfg)
	return &Parser{table: t, mode: cfg.Mode, onlyLT: t.onlyLT, hasVoice: t.hasVoice}
}

// Write feeds the next delta of the reply and calls emit for each piece
// that became safe to release (zero or more).
func (p *Parser) Write(delta string, emit func(Piece)) {
	if delta == "" {
		return
	}
	if p.decided && p.mode == ModeDeltas && p.onlyLT &&
		p.emitted == len(p.raw) && indexLTString(delta) < 0 &&
		(delta[len(delta)-1] < utf8.RuneSelf || incompleteRune([]byte(delta[max(0, len(delta)-utf8.UTFMax+1):])) == 0) {
		// The common case: nothing held back, nothing tag-like.
		p.raw = append(p.raw, delta...)
		p.emitted, p.scanned = len(p.raw), len(p.raw)
		emit(Piece{Text: delta, Raw: delta, Voice: p.voice})
		return
	}
	p.curStart, p.cur = len(p.raw), delta
	p.raw = append(p.raw, delta...)
	p.advance(false, emit)
	p.cur = ""
}

// Flush ends the reply: everything held back is released. A held-back
// suffix that never became a tag comes out as text, unless it is a tag cut
// short at the very end, which never shows (it stays in Raw). In
// ModeSentences the remaining sentences are released, the unfinished last
// one included. The Parser may be Reset and reused afterwards.
func (p *Parser) Flush(emit func(Piece)) {
	p.curStart, p.cur = len(p.raw), ""
	// First the last tags are found, releasing nothing; then the cut tag at
	// the end is removed; then what is left is released from where the
	// release stopped.
	p.flushing = true
	p.advance(true, emit)
	p.flushing = false
	if x := p.cutTagAtEnd(); x < len(p.raw) {
		p.addSpan(x, len(p.raw))
	}
	p.scanned = p.emitted
	p.advance(true, emit)
	if p.emitted < len(p.raw) {
		p.release(len(p.raw), emit)
	}
}

// Raw returns the whole raw reply written so far, tags included, held-back
// text included.
func (p *Parser) Raw() string {
	if len(p.rawStr) != len(p.raw) {
		p.rawStr = string(p.raw)
	}
	return p.rawStr
}

// Cap returns how many bytes of reply the Parser holds room for: the
// buffer Reset keeps for the next reply. A pool of Parsers can drop one
// that grew large on a long reply instead of keeping its memory.
func (p *Parser) Cap() int { return cap(p.raw) }

// Voice reports whether the reply began with VoiceTag. It is false until
// the Parser has seen enough of the reply to know.
func (p *Parser) Voice() bool { return p.voice }

// Reset makes the Parser ready for a new reply with the same Config.
// Strings returned earlier stay valid.
func (p *Parser) Reset() {
	p.raw = p.raw[:0]
	p.rawStr, p.cur, p.curStart = "", "", 0
	p.emitted, p.scanned = 0, 0
	p.spans = p.spans[:0]
	p.decided, p.voice, p.flushing = false, false, false
}

// advance classifies raw[scanned:] and releases what became safe. final
// means the stream ended: nothing waits for more input.
func (p *Parser) advance(final bool, emit func(Piece)) {
	s := p.raw
	i := p.scanned
	k := p.spanFrom(i) // p.spans[k] is the next span at or after i
	stop := len(s)     // where classification stopped
scan:
	for i < len(s) {
		lim := len(s) // the next span, which the fast paths must not enter
		if k < len(p.spans) {
			if i >= p.spans[k].start {
				i = p.spans[k].end
				k++
				continue
			}
			lim = p.spans[k].start
		}
		if p.decided && p.mode == ModeDeltas && p.onlyLT {
			// Fast path: nothing matters but the next '<'.
			j := indexLT(s[i:lim])
			if j < 0 {
				i = lim
				continue
			}
			i += j
		} else if p.decided {
			// Skip plain bytes in a tight loop.
			for i < lim && p.class[s[i]] == 0 {
				i++
			}
			if i == lim {
				continue
			}
		}
		c := s[i]
		cl := p.class[c]
		if cl&classTag != 0 {
			end, tag, hold := p.matchAt(i, k, final)
			if hold {
				stop = i
				break
			}
			if end > 0 {
				if !p.decided && p.tags[tag] == VoiceTag {
					p.decided, p.voice = true, true
				}
				i = p.cut(i, end, k)
				k = p.spanFrom(i)
				continue
			}
		}
		if !p.decided {
			if isSpace(c) {
				i++
				continue
			}
			p.decided = true
		}
		if cl&classSplit != 0 {
			end, wait := p.sentenceEnd(s, i, final)
			if wait {
				stop = i
				break scan
			}
			if end > 0 {
				if !p.flushing && p.prefixBefore(end) < 0 {
					p.release(end, emit)
					k = p.spanFrom(end)
				}
				i = end
				continue
			}
		}
		i++
	}
	p.scanned = stop
	if final && !p.decided {
		p.decided = true
	}
	if p.decided && p.mode == ModeDeltas && !p.flushing && p.scanned > p.emitted {
		end := p.scanned
		if end < len(s) {
			// A possible tag starts at end: text before it that would close
			// up into a tag with it waits too.
			end = p.safeEnd(end)
		}
		if !final {
			// Hold back a rune cut by the end of the delta, so that no
			// piece holds half of it (unless a tag ends inside it, which
			// only a tag of invalid UTF-8 can do).
			if n := incompleteRune(s[p.emitted:end]); n > 0 && !p.removed(end-n, end) {
				end = p.safeEnd(end - n)
			}
		}
		if end > p.emitted {
			p.release(end, emit)
		}
	}
}

// maxChain bounds how many nested tag prefixes safeEnd follows back before
// it holds everything not yet released (only text built to nest tags gets
// there).
const maxChain = 8

// safeEnd returns the largest end at or before x up to which the visible
// text can be released: no tag still to come may start before it and reach
// beyond it (see prefixBefore). It follows nested tag prefixes back, each
// ending where the next begins, at most maxChain of them; past that it
// releases nothing new.
func (p *Parser) safeEnd(x int) int {
	for range maxChain {
		q := p.prefixBefore(x)
		if q < 0 {
			return x
		}
		x = q
	}
	if p.prefixBefore(x) < 0 {
		return x
	}
	return p.emitted
}

// cutTagAtEnd returns where the tag cut short at the end of the reply
// starts: the longest end of the visible text that is a proper prefix of a
// tag, followed back as long as there is one. It returns len(raw) when the
// reply does not end inside a tag.
func (p *Parser) cutTagAtEnd() int {
	x := len(p.raw)
	for {
		q := p.prefixBefore(x)
		if q < 0 {
			return x
		}
		x = q
	}
}

// prefixBefore returns the first visible position q before x (not yet
// released) from which a tag could still start and reach beyond x: the
// visible text from q to x is a non-empty proper prefix of a tag, and the
// text after x may still continue it (see mayContinue). It returns -1 when
// there is none.
func (p *Parser) prefixBefore(x int) int {
	if x > p.emitted && p.class[p.raw[x-1]]&classPrefix == 0 && !p.removed(x-1, x) {
		return -1 // the text before x cannot end a tag prefix
	}
	p.window(x)
	for j, c := range p.win {
		if p.class[c]&classTag == 0 {
			continue
		}
		w := p.win[j:]
		for _, t := range p.tags {
			if len(t) > len(w) && t[:len(w)] == string(w) && p.mayContinue(x, t[len(w):]) {
				return p.winPos[j]
			}
		}
	}
	return -1
}

// mayContinue reports whether the visible text from x may still become
// rest: it matches rest as far as it goes, or before it stops matching it
// reaches a byte that may start a tag, whose removal could change what
// follows.
func (p *Parser) mayContinue(x int, rest string) bool {
	k := p.spanFrom(x)
	for j, pos := 0, x; j < len(rest); j, pos = j+1, pos+1 {
		for k < len(p.spans) && pos == p.spans[k].start {
			pos = p.spans[k].end
			k++
		}
		if pos == len(p.raw) || p.class[p.raw[pos]]&classTag != 0 {
			return true
		}
		if p.raw[pos] != rest[j] {
			return false
		}
	}
	return true
}

// window loads p.win with the visible bytes before x (at most the length of
// the longest tag minus one, none before emitted) and p.winPos with their
// offsets in raw.
func (p *Parser) window(x int) {
	p.win, p.winPos = p.win[:0], p.winPos[:0]
	k := len(p.spans)
	for k > 0 && p.spans[k-1].start >= x {
		k--
	}
	for pos := x; len(p.win) < p.maxTag-1; {
		if k > 0 && p.spans[k-1].end == pos {
			k--
			pos = p.spans[k].start
			continue
		}
		if pos--; pos < p.emitted {
			break
		}
		p.win = append(p.win, p.raw[pos])
		p.winPos = append(p.winPos, pos)
	}
	slices.Reverse(p.win)
	slices.Reverse(p.winPos)
}

// spanFrom returns the index of the first span that starts at or after i.
func (p *Parser) spanFrom(i int) int {
	k := len(p.spans)
	for k > 0 && p.spans[k-1].start >= i {
		k--
	}
	return k
}

// removed reports whether a span overlaps raw[a:b].
func (p *Parser) removed(a, b int) bool {
	for k := len(p.spans) - 1; k >= 0 && p.spans[k].end > a; k-- {
		if p.spans[k].start < b {
			return true
		}
	}
	return false
}

// cut removes the tag found at the visible position i, which ends at end
// (spans[k:] start after i), and returns where scanning resumes: far
// enough back that a tag the removal closed up is found too.
func (p *Parser) cut(i, end, k int) int {
	start := p.addSpan(i, end)
	p.window(start)
	if len(p.winPos) > 0 {
		return p.winPos[0]
	}
	return start
}

// addSpan marks raw[a:b] removed, merging the spans it covers or touches,
// and returns the start of the resulting span.
func (p *Parser) addSpan(a, b int) int {
	k := p.spanFrom(a)
	j := k
	for j < len(p.spans) && p.spans[j].start < b {
		b = max(b, p.spans[j].end)
		j++
	}
	if k > 0 && p.spans[k-1].end >= a {
		k--
		a = p.spans[k].start
	}
	if j < len(p.spans) && p.spans[j].start == b {
		b = p.spans[j].end
		j++
	}
	switch {
	case j == k:
		p.spans = slices.Insert(p.spans, k, span{a, b})
	default:
		p.spans[k] = span{a, b}
		p.spans = slices.Delete(p.spans, k+1, j)
	}
	return a
}

// matchAt looks for a tag in the visible text at raw offset i, a visible
// byte before spans[k]. It returns the raw end of the longest tag that
// starts there and its index in p.tags (end 0 when none), or hold when the
// visible text from i is a proper prefix of a tag that more input could
// complete.
func (p *Parser) matchAt(i, k int, final bool) (end, tag int, hold bool) {
	if k == len(p.spans) { // the common case: the visible text is raw[i:]
		n, tag, hold := p.matchTag(p.raw[i:], final)
		if n == 0 {
			return 0, -1, hold
		}
		return i + n, tag, false
	}
	tag = -1
	for ti, t := range p.tags {
		pos, kk, j := i, k, 0
		for ; j < len(t); j++ {
			for kk < len(p.spans) && pos == p.spans[kk].start {
				pos = p.spans[kk].end
				kk++
			}
			if pos == len(p.raw) || p.raw[pos] != t[j] {
				break
			}
			pos++
		}
		switch {
		case j == len(t):
			if tag < 0 || len(t) > len(p.tags[tag]) {
				end, tag = pos, ti
			}
		case pos == len(p.raw) && !final:
			hold = true
		}
	}
	if hold {
		return 0, -1, true
	}
	return end, tag, false
}

// incompleteRune returns the length of the incomplete UTF-8 sequence that b
// ends with: the first bytes of a rune whose remaining bytes have not
// arrived. It returns 0 when b ends with a whole rune or with invalid bytes
// that no further input can complete.
func incompleteRune(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if c := b[len(b)-k]; utf8.RuneStart(c) {
			if c < utf8.RuneSelf || utf8.FullRune(b[len(b)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}

// matchTag reports the length of the longest tag at the start of rest and
// its index in p.tags (n 0 when none), or hold when rest is a proper prefix
// of some tag and more input could still complete it.
func (p *Parser) matchTag(rest []byte, final bool) (n, tag int, hold bool) {
	tag = -1
	for ti, t := range p.tags {
		if len(rest) >= len(t) {
			if len(t) > n && string(rest[:len(t)]) == t {
				n, tag = len(t), ti
			}
		} else if !final && t[:len(rest)] == string(rest) {
			hold = true
		}
	}
	if hold {
		return 0, -1, true
	}
	return n, tag, false
}

// sentenceEnd looks at a possible sentence end at s[i]. It returns the end
// of the sentence (exclusive), 0 when s[i] ends nothing, or wait when the
// answer depends on input that has not arrived.
func (p *Parser) sentenceEnd(s []byte, i int, final bool) (end int, wait bool) {
	switch c := s[i]; c {
	case '\n':
		return i + 1, false
	case '.', '!', '?':
		if i+1 == len(s) {
			if final {
				return i + 1, false
			}
			return 0, true
		}
		next := s[i+1]
		size := 1
		if next < utf8.RuneSelf {
			if !isSpace(next) {
				return 0, false
			}
		} else {
			var r rune
			r, size = utf8.DecodeRune(s[i+1:])
			if r == utf8.RuneError && !final && !utf8.FullRune(s[i+1:]) {
				return 0, true
			}
			if !unicode.IsSpace(r) {
				return 0, false
			}
		}
		if p.class[next]&classTag != 0 {
			// The white space may begin a tag (" [t]", "\n<x>"): the
			// sentence then ends before it, and the tag stays whole.
			k := p.spanFrom(i + 1)
			if k < len(p.spans) && p.spans[k].start == i+1 {
				return i + 1, false // a tag found already
			}
			end, _, hold := p.matchAt(i+1, k, final)
			if hold {
				return 0, true
			}
			if end > 0 {
				return i + 1, false
			}
		}
		return i + 1 + size, false
	default: // 0xE3 or 0xEF: the lead byte of 。 ！ or ？
		rest := s[i:]
		for _, m := range [...]string{"。", "！", "？"} {
			if len(rest) >= len(m) && string(rest[:len(m)]) == m {
				return i + len(m), false
			}
			if len(rest) < len(m) && !final && m[:len(rest)] == string(rest) {
				return 0, true
			}
		}
		return 0, false
	}
}

// release emits raw[emitted:end] as one piece. end never falls inside a
// tag. A piece within the current delta is sliced out of it; any other is
// copied once.
func (p *Parser) release(end int, emit func(Piece)) {
	start := p.emitted
	var raw string
	if start >= p.curStart && end-p.curStart <= len(p.cur) {
		raw = p.cur[start-p.curStart : end-p.curStart]
	} else {
		raw = string(p.raw[start:end])
	}
	text := raw
	k := 0
	for k < len(p.spans) && p.spans[k].end <= end {
		k++
	}
	if k > 0 {
		text = stripSpans(raw, start, p.spans[:k])
		p.spans = p.spans[:copy(p.spans, p.spans[k:])]
	}
	p.emitted = end
	if p.scanned < end {
		p.scanned = end
	}
	emit(Piece{Text: text, Raw: raw, Voice: p.voice})
}

// stripSpans returns raw without the tag spans; raw starts at offset base
// of the reply, and spans are reply offsets. It slices raw when the text is
// one contiguous run and builds a new string otherwise.
func stripSpans(raw string, base int, spans []span) string {
	runs, n := 0, 0
	pos := 0
	for _, sp := range spans {
		if a := sp.start - base; a > pos {
			runs++
			n += a - pos
		}
		pos = sp.end - base
	}
	if len(raw) > pos {
		runs++
		n += len(raw) - pos
	}
	switch runs {
	case 0:
		return ""
	case 1:
		pos = 0
		for _, sp := range spans {
			if a := sp.start - base; a > pos {
				return raw[pos:a]
			}
			pos = sp.end - base
		}
		return raw[pos:]
	}
	var b strings.Builder
	b.Grow(n)
	pos = 0
	for _, sp := range spans {
		b.WriteString(raw[pos : sp.start-base])
		pos = sp.end - base
	}
	b.WriteString(raw[pos:])
	return b.String()
}

// indexLT returns the index of the first '<' in b, or -1. Deltas are a few
// bytes long, where a plain loop beats the vectorised search.
func indexLT(b []byte) int {
	if len(b) > 32 {
		return bytes.IndexByte(b, '<')
	}
	for i, c := range b {
		if c == '<' {
			return i
		}
	}
	return -1
}

// indexLTString is indexLT for a string.
func indexLTString(s string) int {
	if len(s) > 32 {
		return strings.IndexByte(s, '<')
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '<' {
			return i
		}
	}
	return -1
}

// isSpace reports whether c is ASCII white space.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}
