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
// Version 2 writes tool-call arguments as JSON objects. [Import] also reads
// version 1 ("planround.session/v1"), whose arguments were strings holding
// JSON text: they come back as objects, wrapped by [ValidArguments] where
// they were none.
const ExportFormat = "planround.session/v2"

// exportFormatV1 is the first format, still read by Import.
const exportFormatV1 = "planround.session/v1"

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
		if err = doc.check(); err == nil {
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
// returns it. It is [ImportAs] with the exported session id.
func Import(ctx context.Context, st Store, data []byte) (Session, error) {
	return ImportAs(ctx, st, data, "")
}

// ImportAs adds the session in data, a document written by [Export], to st
// under the id newID (the exported id when newID is empty) and returns it.
//
// Titles, creation times, message contents, tool calls (their arguments as
// the same JSON, compacted), flags and times, and summaries come back
// exactly. Message and summary ids are the store's
// new ones, so they usually differ from the export's; each archived message
// is linked to the new id of the summary it was archived into, and each
// summary's FirstID and LastID name the new ids of the same messages. The
// session's UpdatedAt is set by the store as it writes: the time of the
// import for a session with messages.
//
// The whole document is checked before anything is written: data that is
// not an export of [ExportFormat], or whose summaries and archived messages
// contradict each other, is an error wrapping [ErrInvalidExport]. An id that
// already exists is an error wrapping [ErrExists]. When writing fails
// half-way (the store failed, ctx ended) the partly imported session is
// deleted again, so nothing is left behind.
func ImportAs(ctx context.Context, st Store, data []byte, newID string) (Session, error) {
	doc, err := parseExport(data)
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
	if err := writeImport(ctx, st, sess.ID, doc); err != nil {
		if derr := st.DeleteSession(context.WithoutCancel(ctx), sess.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("memory: import: clean-up failed: %w", derr))
		}
		return Session{}, fmt.Errorf("memory: import %q: %w", sess.ID, err)
	}
	return st.Session(ctx, sess.ID)
}

// writeImport appends the messages and replays the summaries, oldest first.
func writeImport(ctx context.Context, st Store, id string, doc export) error {
	in := CloneMessages(doc.Messages)
	for i := range in {
		in[i].ID, in[i].SummaryID = 0, 0
	}
	var out []Message
	if len(in) > 0 {
		var err error
		if out, err = st.Append(ctx, id, in...); err != nil {
			return err
		}
	}
	for _, s := range doc.Summaries {
		// The new ids of the first and last message inside the range: the
		// replay archives the same messages as the original did.
		first, last := int64(0), int64(0)
		for i, m := range doc.Messages {
			if m.ID >= s.FirstID && m.ID <= s.LastID {
				if first == 0 {
					first = out[i].ID
				}
				last = out[i].ID
			}
		}
		if _, err := st.Summarize(ctx, id, Summary{Content: s.Content, CreatedAt: s.CreatedAt, FirstID: first, LastID: last}); err != nil {
			return err
		}
	}
	return nil
}

// parseExport decodes and checks an export document.
func parseExport(data []byte) (export, error) {
	var probe struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return export{}, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	switch {
	case probe.Format == nil:
		return export{}, fmt.Errorf("%w: no \"format\" field", ErrInvalidExport)
	case *probe.Format != ExportFormat && *probe.Format != exportFormatV1:
		return export{}, fmt.Errorf("%w: format %q, want %q (or %q)", ErrInvalidExport, *probe.Format, ExportFormat, exportFormatV1)
	}
	var doc export
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return export{}, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return export{}, fmt.Errorf("%w: data after the document", ErrInvalidExport)
	}
	if err := doc.readArguments(*probe.Format == exportFormatV1); err != nil {
		return export{}, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	if err := doc.check(); err != nil {
		return export{}, fmt.Errorf("%w: %v", ErrInvalidExport, err)
	}
	return doc, nil
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

// check verifies that the document is whole and consistent: what a store
// would accept, and summaries that, replayed oldest first, archive exactly
// the messages that name them.
func (doc export) check() error {
	if doc.Session.ID == "" {
		return errors.New("session has no id")
	}
	if err := ValidateSession(doc.Session); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	for i, m := range doc.Messages {
		if m.ID <= 0 || (i > 0 && m.ID <= doc.Messages[i-1].ID) {
			return fmt.Errorf("message %d: id %d not positive and increasing", i, m.ID)
		}
		if !validRole(m.Role) {
			return fmt.Errorf("message %d: invalid role %q", i, m.Role)
		}
		for k, c := range m.ToolCalls {
			if len(c.Arguments) > 0 && !IsObject(c.Arguments) {
				return fmt.Errorf("message %d: tool call %d: arguments are not a JSON object", i, k)
			}
		}
		if err := checkImages(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if m.CreatedAt.IsZero() {
			return fmt.Errorf("message %d: no created_at", i)
		}
		if err := checkTime(fmt.Sprintf("message %d: created_at", i), m.CreatedAt); err != nil {
			return err
		}
	}
	archived := make(map[int64]int64, len(doc.Messages)) // message id → summary id by replay
	for i, s := range doc.Summaries {
		if s.ID <= 0 || (i > 0 && s.ID <= doc.Summaries[i-1].ID) {
			return fmt.Errorf("summary %d: id %d not positive and increasing", i, s.ID)
		}
		if strings.TrimSpace(s.Content) == "" {
			return fmt.Errorf("summary %d: empty content", i)
		}
		if err := ValidateSummary(s); err != nil {
			return fmt.Errorf("summary %d: %w", i, err)
		}
		n := 0
		for _, m := range doc.Messages {
			if m.ID >= s.FirstID && m.ID <= s.LastID && archived[m.ID] == 0 {
				archived[m.ID] = s.ID
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("summary %d: no message in its range [%d, %d]", s.ID, s.FirstID, s.LastID)
		}
	}
	for _, m := range doc.Messages {
		if m.SummaryID != archived[m.ID] {
			return fmt.Errorf("message %d: summary_id %d, but its summaries archive it into %d", m.ID, m.SummaryID, archived[m.ID])
		}
	}
	return nil
}
