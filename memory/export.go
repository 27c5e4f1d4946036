package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ExportFormat names the JSON format written by [Export] and read by
// [Import].
//
// Version 3 writes how each tool call ended ([Message.Outcome] and
// [Message.Cause], "outcome" and "cause" on tool messages); version 2
// wrote tool-call arguments as JSON objects. [Import] also reads version 2
// ("planround.session/v2"), whose tool messages come back with an unknown
// outcome, and version 1 ("planround.session/v1"), whose arguments were
// strings holding JSON text: they come back as objects, wrapped by
// [ValidArguments] where they were none. A version 1 or 2 document that
// gives an outcome or a cause is invalid: those versions had none.
const ExportFormat = "planround.session/v3"

// The earlier formats, still read by Import.
const (
	exportFormatV1 = "planround.session/v1"
	exportFormatV2 = "planround.session/v2"
)

// ErrInvalidExport is returned (wrapped) by [Import] for data that is not a
// valid session export: not JSON, another format or version, or contents
// that contradict each other.
var ErrInvalidExport = errors.New("memory: invalid session export")

// export is the JSON document of ExportFormat.
type export struct {
	Format    string    `json:"format"`
	Session   Session   `json:"session"`
	Messages  []Message `json:"messages"`
	Summaries []Summary `json:"summaries"`
}

// Export returns a session as a JSON document of [ExportFormat]: the session,
// every message (archived ones included, with their summary_id, and their
// images, bytes in base64) and every summary, with their ids and times.
// [Import] reads it back.
//
// Export reads the session in several calls; a session being summarised at
// the same moment may read inconsistently, which Export detects: it retries
// a few times and then returns an error.
func Export(ctx context.Context, st Store, sessionID string) ([]byte, error) {
	var err error
	for range 3 {
		var doc export
		if doc, err = readExport(ctx, st, sessionID); err != nil {
			return nil, err
		}
		if _, err = doc.check(); err == nil {
			return marshalExport(doc)
		}
	}
	return nil, fmt.Errorf("memory: export %q: session changed while it was read: %w", sessionID, err)
}

// marshalExport writes doc indented, without escaping HTML characters:
// tool-call arguments keep their bytes apart from white space, which
// Import removes again.
func marshalExport(doc export) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func readExport(ctx context.Context, st Store, sessionID string) (export, error) {
	doc := export{Format: ExportFormat}
	var err error
	if doc.Session, err = st.Session(ctx, sessionID); err != nil {
		return export{}, err
	}
	if doc.Messages, err = st.Messages(ctx, sessionID, true); err != nil {
		return export{}, err
	}
	if doc.Summaries, err = st.Summaries(ctx, sessionID); err != nil {
		return export{}, err
	}
	if doc.Messages == nil {
		doc.Messages = []Message{}
	}
	if doc.Summaries == nil {
		doc.Summaries = []Summary{}
	}
	return doc, nil
}

// Import adds the session in data, a document written by [Export], to st and
// returns it. It is [ImportFrom] of data with the exported session id.
func Import(ctx context.Context, st Store, data []byte) (Session, error) {
	return ImportFrom(ctx, st, bytes.NewReader(data), "")
}

// ImportAs is [ImportFrom] of data: it adds the session in data, a document
// written by [Export], to st under the id newID.
func ImportAs(ctx context.Context, st Store, data []byte, newID string) (Session, error) {
	return ImportFrom(ctx, st, bytes.NewReader(data), newID)
}

// ImportFrom adds the session in the document read from r, written by
// [Export], to st under the id newID (the exported id when newID is empty)
// and returns it. It reads r to its end, one message and one summary at a
// time: besides what it decoded, it holds about one message of the
// document's text. Its time and memory grow in proportion to the document
// (n log n at most in its number of summaries), whatever ranges its
// summaries name.
//
// Titles, creation times, message contents, tool calls (their arguments as
// the same JSON, compacted), the outcomes and causes of tool messages,
// flags and times, and summaries come back exactly. Message and summary
// ids are the store's new ones, so they usually differ from the export's;
// each archived message is linked to the new id of the summary it was
// archived into, and each summary's FirstID and LastID name the new ids of
// the same messages. The session's UpdatedAt is set by the store as it
// writes: the time of the import for a session with messages.
//
// The whole document is read and checked before anything is written: data
// that is not an export of [ExportFormat], or whose summaries and archived
// messages contradict each other, is an error wrapping [ErrInvalidExport].
// An error of r is returned wrapped, without [ErrInvalidExport]. An id that
// already exists is an error wrapping [ErrExists]. When writing fails
// half-way (the store failed, ctx ended) the partly imported session is
// deleted again, so nothing is left behind.
func ImportFrom(ctx context.Context, st Store, r io.Reader, newID string) (Session, error) {
	doc, ranges, err := parseExport(r)
	if err != nil {
		return Session{}, err
	}
	if newID != "" {
		doc.Session.ID = newID
	}
	sess := doc.Session
	sess.UpdatedAt = sess.CreatedAt
	sess, err = st.CreateSession(ctx, sess)
	if err != nil {
		return Session{}, fmt.Errorf("memory: import: %w", err)
	}
	if err := writeImport(ctx, st, sess.ID, doc, ranges); err != nil {
		if derr := st.DeleteSession(context.WithoutCancel(ctx), sess.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("memory: import: clean-up failed: %w", derr))
		}
		return Session{}, fmt.Errorf("memory: import %q: %w", sess.ID, err)
	}
	return st.Session(ctx, sess.ID)
}

// writeImport appends the messages and replays the summaries, oldest first;
// ranges[k] are the indexes in doc.Messages of the messages that summary k's
// range holds (see check). It takes doc.Messages over.
func writeImport(ctx context.Context, st Store, id string, doc export, ranges []span) error {
	var ids []int64 // the new ids, by index in doc.Messages
	if len(doc.Messages) > 0 {
		in := doc.Messages
		for i := range in {
			in[i].ID, in[i].SummaryID = 0, 0
		}
		out, err := st.Append(ctx, id, in...)
		if err != nil {
			return err
		}
		if len(out) != len(in) {
			return fmt.Errorf("the store appended %d messages of %d", len(out), len(in))
		}
		ids = make([]int64, len(out))
		for i, m := range out {
			ids[i] = m.ID
		}
	}
	for k, s := range doc.Summaries {
		// The new ids of the first and last message inside the range: the
		// replay archives the same messages as the original did.
		r := ranges[k]
		if _, err := st.Summarize(ctx, id, Summary{Content: s.Content, CreatedAt: s.CreatedAt, FirstID: ids[r.lo], LastID: ids[r.hi-1]}); err != nil {
			return err
		}
	}
	return nil
}

// parseExport decodes an export document from r and checks it. It returns
// the ranges of check.
func parseExport(r io.Reader) (export, []span, error) {
	er := &errReader{r: r}
	doc, format, err := decodeExport(er)
	switch {
	case er.err != nil:
		return export{}, nil, fmt.Errorf("memory: import: reading the export: %w", er.err)
	case err != nil:
		return export{}, nil, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	if err := doc.readArguments(format == exportFormatV1); err != nil {
		return export{}, nil, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	if err := doc.checkFormat(format); err != nil {
		return export{}, nil, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	ranges, err := doc.check()
	if err != nil {
		return export{}, nil, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	return doc, ranges, nil
}

// errReader remembers the first error of r other than io.EOF: a decoder
// returns it as it is, and it says that the reading failed, not the
// document.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// decodeExport decodes the JSON object of an export document from r, field
// by field and its arrays element by element, so that it never holds more
// of the text than one element; and checks that nothing follows it. Field
// names match as encoding/json matches them (case-insensitively); a field
// given twice and an unknown field are errors. It returns the document and
// its format, which it checks.
func decodeExport(r io.Reader) (doc export, format string, err error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := wantDelim(dec, '{', "a JSON object"); err != nil {
		return export{}, "", err
	}
	var f *string
	seen := make(map[string]bool, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return export{}, "", unexpectedEOF(err)
		}
		key, _ := tok.(string)
		name := key
		for _, n := range []string{"format", "session", "messages", "summaries"} {
			if strings.EqualFold(key, n) {
				name = n
			}
		}
		if seen[name] {
			return export{}, "", fmt.Errorf("field %q given twice", key)
		}
		seen[name] = true
		switch name {
		case "format":
			if err := dec.Decode(&f); err != nil {
				return export{}, "", fmt.Errorf("format: %w", unexpectedEOF(err))
			}
			if f != nil && *f != ExportFormat && *f != exportFormatV2 && *f != exportFormatV1 {
				return export{}, "", fmt.Errorf("format %q, want %q (or %q, %q)", *f, ExportFormat, exportFormatV2, exportFormatV1)
			}
		case "session":
			if err := dec.Decode(&doc.Session); err != nil {
				return export{}, "", fmt.Errorf("session: %w", unexpectedEOF(err))
			}
		case "messages":
			err = decodeArray(dec, "messages", "message", func(i int) error {
				doc.Messages = append(doc.Messages, Message{})
				return dec.Decode(&doc.Messages[i])
			})
		case "summaries":
			err = decodeArray(dec, "summaries", "summary", func(i int) error {
				doc.Summaries = append(doc.Summaries, Summary{})
				return dec.Decode(&doc.Summaries[i])
			})
		default:
			err = fmt.Errorf("json: unknown field %q", key)
		}
		if err != nil {
			return export{}, "", err
		}
	}
	if err := wantDelim(dec, '}', "the end of the object"); err != nil {
		return export{}, "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return export{}, "", errors.New("data after top-level value")
	}
	if f == nil {
		return export{}, "", errors.New(`no "format" field`)
	}
	return doc, *f, nil
}

// wantDelim reads the next token of dec, which must be d.
func wantDelim(dec *json.Decoder, d json.Delim, what string) error {
	tok, err := dec.Token()
	switch {
	case err == io.EOF && d == '{':
		return errors.New("empty document")
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	if tok != d {
		return fmt.Errorf("want %s, found %v", what, tok)
	}
	return nil
}

// decodeArray reads the JSON array (or null) of the field name from dec,
// calling each with the index of each element, which it must decode. Errors
// name the element (elem and its index) or the field.
func decodeArray(dec *json.Decoder, name, elem string, each func(i int) error) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", name, unexpectedEOF(err))
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("%s: want an array, found %v", name, tok)
	}
	for i := 0; dec.More(); i++ {
		if err := each(i); err != nil {
			return fmt.Errorf("%s %d: %w", elem, i, unexpectedEOF(err))
		}
	}
	if _, err = dec.Token(); err != nil { // ']'
		return fmt.Errorf("%s: %w", name, unexpectedEOF(err))
	}
	return nil
}

// unexpectedEOF returns io.ErrUnexpectedEOF for io.EOF, which inside a
// document means that it ends early, and err otherwise.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readArguments turns the tool-call arguments of a decoded document into
// what a store keeps: in version 1 they are JSON strings holding the text,
// made objects with ValidArguments; in version 2 they are objects. Both are
// compacted (Export indents them).
func (doc export) readArguments(v1 bool) error {
	for i := range doc.Messages {
		for k := range doc.Messages[i].ToolCalls {
			c := &doc.Messages[i].ToolCalls[k]
			if len(c.Arguments) == 0 {
				continue
			}
			if v1 {
				var text string
				if err := json.Unmarshal(c.Arguments, &text); err != nil {
					return fmt.Errorf("message %d: tool call %d: arguments: want a string in %s: %v", i, k, exportFormatV1, err)
				}
				c.Arguments = ValidArguments([]byte(text))
			}
			var b bytes.Buffer
			if json.Compact(&b, c.Arguments) == nil {
				c.Arguments = b.Bytes()
			}
		}
	}
	return nil
}

// checkFormat refuses what the document's format did not have: an outcome
// or a cause before version 3. Their tool messages stay unknown.
func (doc export) checkFormat(format string) error {
	if format == ExportFormat {
		return nil
	}
	for i, m := range doc.Messages {
		if m.Outcome != "" || m.Cause != "" {
			return fmt.Errorf("message %d: an outcome or a cause in a %s document (they came with %s)", i, format, ExportFormat)
		}
	}
	return nil
}

// span is a range of indexes [lo, hi) in a document's messages.
type span struct{ lo, hi int }

// check verifies that the document is whole and consistent: what a store
// would accept, and summaries that, replayed oldest first, archive exactly
// the messages that name them. It returns, for each summary, the indexes of
// the messages its range holds, archived or not.
//
// Its time is n log n at most, whatever the ranges: the replay finds a
// range's ends by binary search (the ids increase) and skips the messages
// archived before (see nextActive).
func (doc export) check() ([]span, error) {
	if doc.Session.ID == "" {
		return nil, errors.New("session has no id")
	}
	if err := ValidateSession(doc.Session); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	msgs := doc.Messages
	for i, m := range msgs {
		if m.ID <= 0 || (i > 0 && m.ID <= msgs[i-1].ID) {
			return nil, fmt.Errorf("message %d: id %d not positive and increasing", i, m.ID)
		}
		if !validRole(m.Role) {
			return nil, fmt.Errorf("message %d: invalid role %q", i, m.Role)
		}
		for k, c := range m.ToolCalls {
			if len(c.Arguments) > 0 && !IsObject(c.Arguments) {
				return nil, fmt.Errorf("message %d: tool call %d: arguments are not a JSON object", i, k)
			}
		}
		if err := checkOutcome(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if err := checkImages(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if m.CreatedAt.IsZero() {
			return nil, fmt.Errorf("message %d: no created_at", i)
		}
		if err := checkTime(fmt.Sprintf("message %d: created_at", i), m.CreatedAt); err != nil {
			return nil, err
		}
	}
	ranges := make([]span, len(doc.Summaries))
	archived := make([]int64, len(msgs)) // summary id by replay, by index
	active := newNextActive(len(msgs))
	for k, s := range doc.Summaries {
		if s.ID <= 0 || (k > 0 && s.ID <= doc.Summaries[k-1].ID) {
			return nil, fmt.Errorf("summary %d: id %d not positive and increasing", k, s.ID)
		}
		if strings.TrimSpace(s.Content) == "" {
			return nil, fmt.Errorf("summary %d: empty content", k)
		}
		if err := ValidateSummary(s); err != nil {
			return nil, fmt.Errorf("summary %d: %w", k, err)
		}
		lo, hi := idRange(msgs, s.FirstID, s.LastID)
		n := 0
		for i := active.from(lo); i < hi; i = active.from(i + 1) {
			archived[i] = s.ID
			active.remove(i)
			n++
		}
		replayVisits.Add(int64(n))
		if n == 0 {
			return nil, fmt.Errorf("summary %d: no message in its range [%d, %d]", s.ID, s.FirstID, s.LastID)
		}
		ranges[k] = span{lo, hi}
	}
	replayVisits.Add(active.hops)
	for i, m := range msgs {
		if m.SummaryID != archived[i] {
			return nil, fmt.Errorf("message %d: summary_id %d, but its summaries archive it into %d", m.ID, m.SummaryID, archived[i])
		}
	}
	return ranges, nil
}
