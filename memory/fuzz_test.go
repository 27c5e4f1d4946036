package memory_test

import (
	"encoding/base64"
	"testing"

	"github.com/planround/planround/memory"
)

// FuzzValidateImage: any image is accepted or refused without a panic, an
// accepted one has a description, and no accepted data: URL holds more
// than MaxImageSize bytes.
func FuzzValidateImage(f *testing.F) {
	f.Add("", "image/png", []byte("\x89PNG"))
	f.Add("https://example.com/a.png", "", []byte(nil))
	f.Add("data:image/gif;base64,R0lGODlhAQABAAAAACw=", "", []byte(nil))
	f.Add("data:image/png;base64,!!", "", []byte(nil))
	f.Add("data:;base64,AAAA", "", []byte(nil))
	f.Add("data:image/png", "image/png", []byte{})
	f.Add("http://[::1", "image/", []byte("x"))
	f.Fuzz(func(t *testing.T, url, mimeType string, data []byte) {
		img := memory.Image{URL: url, MIMEType: mimeType, Data: data}
		err := memory.ValidateImage(img)
		s := img.String()
		if err != nil {
			return
		}
		if s == "" {
			t.Errorf("valid image %+v has no description", img)
		}
		if (url == "") == (len(data) == 0) {
			t.Errorf("valid image %+v has both or neither of URL and Data", img)
		}
		if rest, ok := cutDataURL(url); ok {
			b, err := base64.StdEncoding.DecodeString(rest)
			if err != nil || len(b) > memory.MaxImageSize {
				t.Errorf("valid data: URL of %d bytes (%v)", len(b), err)
			}
		}
	})
}

func cutDataURL(u string) (string, bool) {
	for i := 0; i+8 <= len(u); i++ {
		if u[i:i+8] == ";base64," {
			return u[i+8:], len(u) > 5 && u[:5] == "data:"
		}
	}
	return "", false
}

// FuzzImport: any document is imported or refused without a panic; what is
// imported exports and imports again to the same messages.
func FuzzImport(f *testing.F) {
	src := new(memory.MemStore)
	ctx := f.Context()
	src.CreateSession(ctx, memory.Session{ID: "s"})
	src.Append(ctx, "s",
		memory.Message{Role: memory.RoleUser, Content: "look", Images: []memory.Image{{MIMEType: "image/png", Data: []byte("png")}}},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f", Arguments: []byte(`{"a":1}`)}}},
		memory.Message{Role: memory.RoleTool, ToolCallID: "c", Content: "ok"},
	)
	good, err := memory.Export(ctx, src, "s")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"planround.session/v1","session":{"id":"x"},"messages":[{"id":1,"role":"assistant","tool_calls":[{"id":"c","name":"f","arguments":"{\"a\": 1"}],"created_at":"2025-01-01T00:00:00Z"}],"summaries":[]}`))
	f.Add([]byte(`{"format":"planround.session/v2","session":{"id":"x"},"messages":[{"id":1,"role":"user","images":[{"url":"data:image/png;base64,AA=="}],"created_at":"2025-01-01T00:00:00Z"}],"summaries":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := new(memory.MemStore)
		sess, err := memory.Import(t.Context(), st, data)
		if err != nil {
			return
		}
		again, err := memory.Export(t.Context(), st, sess.ID)
		if err != nil {
			t.Fatalf("export of an import: %v", err)
		}
		st2 := new(memory.MemStore)
		if _, err := memory.Import(t.Context(), st2, again); err != nil {
			t.Fatalf("import of an export: %v\n%s", err, again)
		}
		a, _ := st.Messages(t.Context(), sess.ID, true)
		b, _ := st2.Messages(t.Context(), sess.ID, true)
		if len(a) != len(b) {
			t.Fatalf("%d messages, then %d", len(a), len(b))
		}
		for i := range a {
			if a[i].Content != b[i].Content || len(a[i].Images) != len(b[i].Images) || len(a[i].ToolCalls) != len(b[i].ToolCalls) {
				t.Fatalf("message %d: %+v, then %+v", i, a[i], b[i])
			}
			for k := range a[i].ToolCalls {
				if string(a[i].ToolCalls[k].Arguments) != string(b[i].ToolCalls[k].Arguments) {
					t.Fatalf("message %d call %d: arguments %s, then %s", i, k, a[i].ToolCalls[k].Arguments, b[i].ToolCalls[k].Arguments)
				}
			}
		}
	})
}
