package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/mcpclient"
	"github.com/planround/planround/memory"
)

// listSessions returns GET /api/sessions as client sees it.
func listSessions(t *testing.T, client *http.Client, base string) []sessionEntry {
	t.Helper()
	status, body := getAs(t, client, base+"/api/sessions")
	require.Equal(t, http.StatusOK, status, body)
	var out []sessionEntry
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	return out
}

func ids(list []sessionEntry) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, e.ID)
	}
	return out
}

// converse sends message in the session and waits for its run to end.
func (h *harness) converse(t *testing.T, session, message string) {
	t.Helper()
	ev, _ := h.openEvents(t, session)
	defer ev.close()
	h.chat(t, session, message)
	done, _ := ev.runDone(t)
	require.Equal(t, "finished", done.Status, "%+v", done)
}

// importAs posts body to /api/sessions/import with client.
func importAs(t *testing.T, client *http.Client, base string, body []byte) (int, map[string]any) {
	t.Helper()
	return postAs(t, client, base, "/api/sessions/import", string(body))
}

// exportAs returns GET /api/sessions/export for the session with client.
func exportAs(t *testing.T, client *http.Client, base, session string) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Get(base + "/api/sessions/export?session_id=" + url.QueryEscape(session))
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp, b.Bytes()
}

// TestSessionList: GET /api/sessions lists the browser's stored sessions,
// most recent first, titled after their first message; never another
// browser's; a session nothing was sent in is not stored, so not listed;
// a session whose run is active says so.
func TestSessionList(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	status, body := getAs(t, h.newClient(t), h.ts.URL+"/api/sessions")
	assert.Equal(t, http.StatusUnauthorized, status, body)
	assert.Empty(t, listSessions(t, h.client, h.ts.URL), "a new browser has no sessions")

	a1, a2, unused := h.newSession(t), h.newSession(t), h.newSession(t)
	h.converse(t, a1, "Hello!")
	h.converse(t, a2, "  Tell me\nabout   <b>Go</b>\t"+strings.Repeat("and more ", 30))
	h.converse(t, a1, "Hello again") // a1 is the most recent now

	other := h.newBrowser(t)
	b1 := postSession(t, other, h.ts.URL)
	h2 := *h
	h2.client = other
	h2.converse(t, b1, "Hello from another browser")

	mine := listSessions(t, h.client, h.ts.URL)
	assert.Equal(t, []string{a1, a2}, ids(mine), "this browser's stored sessions, most recent first")
	assert.NotContains(t, ids(mine), unused)
	assert.Equal(t, "Hello!", mine[0].Title, "titled after the first message, not renamed by later ones")
	assert.True(t, strings.HasPrefix(mine[1].Title, "Tell me about <b>Go</b> and more and more"), mine[1].Title)
	assert.Equal(t, maxTitleLen, len([]rune(mine[1].Title)), "cut, with an ellipsis")
	assert.True(t, strings.HasSuffix(mine[1].Title, "…"))
	assert.False(t, mine[0].UpdatedAt.Before(mine[1].UpdatedAt))
	assert.Equal(t, []string{b1}, ids(listSessions(t, other, h.ts.URL)), "the other browser sees its own only")

	// A run waiting for approval: busy.
	ev, _ := h.openEvents(t, a2)
	h.chat(t, a2, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	mine = listSessions(t, h.client, h.ts.URL)
	require.Equal(t, []string{a2, a1}, ids(mine))
	assert.True(t, mine[0].Busy)
	assert.False(t, mine[1].Busy)
	h.decide(t, a2, call, true)
	ev.runDone(t)

	// A session created by its first message keeps a title given before.
	status, out := h.post(t, "/api/sessions/rename", mustString(map[string]string{"session_id": a1, "title": "Greetings"}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	h.converse(t, a1, "Hello once more")
	assert.Equal(t, "Greetings", listSessions(t, h.client, h.ts.URL)[0].Title)
}

// TestRenameDeleteExportImport: the owner renames, exports, imports (a new
// session of the browser with the same messages) and deletes; a session
// being deleted while a run is active is refused; the open streams of a
// deleted session hear it.
func TestRenameDeleteExportImport(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s := h.newSession(t)
	h.converse(t, s, "Hello!")
	rename := func(id, title string) (int, map[string]any) {
		return h.post(t, "/api/sessions/rename", mustString(map[string]string{"session_id": id, "title": title}))
	}

	// Rename.
	status, out := rename(s, "  My\nfirst   chat ")
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, true, out["success"])
	assert.Equal(t, "My first chat", listSessions(t, h.client, h.ts.URL)[0].Title, "on one line")
	status, out = rename(s, " \n\t")
	assert.Equal(t, http.StatusBadRequest, status, "%v", out)
	assert.Contains(t, out["error"], "blank")
	status, out = rename(h.newSession(t), "never stored")
	assert.Equal(t, http.StatusNotFound, status, "%v", out)
	assert.Contains(t, out["error"], "no such session")
	status, out = rename("../etc", "x")
	assert.Equal(t, http.StatusBadRequest, status, "%v", out)
	assert.Equal(t, "My first chat", listSessions(t, h.client, h.ts.URL)[0].Title, "refused renames change nothing")

	// Export: a download of memory.Export's document.
	resp, doc := exportAs(t, h.client, h.ts.URL, s)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", doc)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, `attachment; filename="planround-`+s+`.json"`, resp.Header.Get("Content-Disposition"))
	want, err := memory.Export(t.Context(), h.srv.store, s)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(doc))
	resp, body := exportAs(t, h.client, h.ts.URL, h.newSession(t))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)

	// Import: a new session of this browser, the same messages.
	status, out = importAs(t, h.client, h.ts.URL, doc)
	require.Equal(t, http.StatusOK, status, "%v", out)
	copyID, _ := out["session_id"].(string)
	assert.NotEqual(t, s, copyID)
	assert.Equal(t, sessionOwner(s), sessionOwner(copyID), "the importing browser's")
	assert.Equal(t, "My first chat (imported)", out["title"], "a copy says so")
	assert.Equal(t, []string{copyID, s}, ids(listSessions(t, h.client, h.ts.URL)))
	orig, err := h.srv.store.Messages(t.Context(), s, true)
	require.NoError(t, err)
	got, err := h.srv.store.Messages(t.Context(), copyID, true)
	require.NoError(t, err)
	require.Len(t, got, len(orig))
	for i := range orig {
		assert.Equal(t, orig[i].Role, got[i].Role)
		assert.Equal(t, orig[i].Content, got[i].Content)
	}
	status, hist := getAs(t, h.client, h.ts.URL+"/api/history?session_id="+copyID)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, hist, "Hello! Nice to meet you.")
	// The copy is a conversation like any other.
	h.converse(t, copyID, "Hello again")

	// Delete: refused while a run is active.
	ev, _ := h.openEvents(t, s)
	h.chat(t, s, "Please run `ls`")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	del := func(id string) (int, map[string]any) {
		return h.post(t, "/api/sessions/delete", mustString(map[string]string{"session_id": id}))
	}
	status, out = del(s)
	assert.Equal(t, http.StatusConflict, status, "%v", out)
	assert.Contains(t, out["error"], "interrupt")
	h.decide(t, s, call, false)
	ev.runDone(t)

	status, out = del(s)
	require.Equal(t, http.StatusOK, status, "%v", out)
	deleted := ev.next(t)
	assert.Equal(t, "session_deleted", deleted.name, "the open stream hears it")
	assert.Equal(t, []string{copyID}, ids(listSessions(t, h.client, h.ts.URL)))
	_, err = h.srv.store.Session(t.Context(), s)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	status, hist = getAs(t, h.client, h.ts.URL+"/api/history?session_id="+s)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "[]\n", hist)
	status, out = del(s)
	assert.Equal(t, http.StatusNotFound, status, "%v", out)
	// The imported copy is untouched.
	got2, err := h.srv.store.Messages(t.Context(), copyID, true)
	require.NoError(t, err)
	assert.Greater(t, len(got2), len(orig))
}

// TestOtherBrowsersCannotManageASession: without the owner cookie (401) or
// with another browser's (403), a session can be neither renamed, nor
// deleted, nor exported, and an import never lands on it, even from its own
// export or from a document naming its id.
func TestOtherBrowsersCannotManageASession(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	victim := h.newSession(t)
	h.converse(t, victim, "Hello! My secret is 4711.")
	doc, err := memory.Export(t.Context(), h.srv.store, victim)
	require.NoError(t, err)
	before, err := h.srv.store.Messages(t.Context(), victim, true)
	require.NoError(t, err)

	noCookie := h.newClient(t)
	badCookie := h.newClient(t)
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	badCookie.Jar.SetCookies(u, []*http.Cookie{{Name: ownerCookie, Value: strings.Repeat("zz", ownerSecretLen/2)}})
	other := h.newBrowser(t)
	for _, tc := range []struct {
		name   string
		client *http.Client
		status int
	}{
		{"no cookie", noCookie, http.StatusUnauthorized},
		{"malformed cookie", badCookie, http.StatusUnauthorized},
		{"another browser", other, http.StatusForbidden},
	} {
		status, out := postAs(t, tc.client, h.ts.URL, "/api/sessions/rename", mustString(map[string]string{"session_id": victim, "title": "pwned"}))
		assert.Equal(t, tc.status, status, "%s: rename: %v", tc.name, out)
		assert.Equal(t, false, out["success"])
		status, out = postAs(t, tc.client, h.ts.URL, "/api/sessions/delete", mustString(map[string]string{"session_id": victim}))
		assert.Equal(t, tc.status, status, "%s: delete: %v", tc.name, out)
		assert.Equal(t, false, out["success"])
		resp, body := exportAs(t, tc.client, h.ts.URL, victim)
		assert.Equal(t, tc.status, resp.StatusCode, "%s: export: %s", tc.name, body)
		assert.NotContains(t, string(body), "4711", "%s: export shows nothing of the session", tc.name)
		assert.Empty(t, resp.Header.Get("Content-Disposition"))
		if tc.status == http.StatusUnauthorized {
			status, body := getAs(t, tc.client, h.ts.URL+"/api/sessions")
			assert.Equal(t, tc.status, status, "%s: list: %s", tc.name, body)
			status, out = importAs(t, tc.client, h.ts.URL, doc)
			assert.Equal(t, tc.status, status, "%s: import: %v", tc.name, out)
		} else {
			assert.Empty(t, listSessions(t, tc.client, h.ts.URL), "%s: the list holds none of the victim's", tc.name)
		}
	}
	// A forged id claiming the victim's owner is still not the victim's
	// browser.
	forged := sessionOwner(victim) + "-0123456789abcdef"
	status, out := postAs(t, other, h.ts.URL, "/api/sessions/delete", mustString(map[string]string{"session_id": forged}))
	assert.Equal(t, http.StatusForbidden, status, "%v", out)

	// The other browser imports the victim's export, and a document that
	// names the victim's id: copies of its own, the victim's session as it
	// was.
	for _, data := range [][]byte{doc, bytes.ReplaceAll(doc, []byte(victim), []byte(forged))} {
		status, out = importAs(t, other, h.ts.URL, data)
		require.Equal(t, http.StatusOK, status, "%v", out)
		id, _ := out["session_id"].(string)
		assert.NotEqual(t, sessionOwner(victim), sessionOwner(id), "imported as the importer's")
		assert.NotEqual(t, victim, id)
		assert.NotEqual(t, forged, id)
	}
	assert.Len(t, listSessions(t, other, h.ts.URL), 2)
	mine := listSessions(t, h.client, h.ts.URL)
	assert.Equal(t, []string{victim}, ids(mine), "the victim's browser lists its session only")
	assert.Equal(t, "Hello! My secret is 4711.", mine[0].Title, "not renamed")
	msgs, err := h.srv.store.Messages(t.Context(), victim, true)
	require.NoError(t, err)
	assert.Equal(t, before, msgs, "nothing added to the victim's session")
	_, err = h.srv.store.Session(t.Context(), forged)
	assert.ErrorIs(t, err, memory.ErrNotFound)
}

// TestImportRefusals: a body over MaxImportSize (413), not JSON (415), not
// a session export (400, saying what is wrong), empty (400): each stores
// nothing.
func TestImportRefusals(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{MaxImportSize: 4 << 10})
	s := h.newSession(t)
	h.converse(t, s, "Hello!")
	doc, err := memory.Export(t.Context(), h.srv.store, s)
	require.NoError(t, err)
	require.Less(t, len(doc), 4<<10)

	big := bytes.Replace(doc, []byte(`"Hello!"`), []byte(`"`+strings.Repeat("x", 8<<10)+`"`), 1)
	status, out := importAs(t, h.client, h.ts.URL, big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, "%v", out)
	assert.Contains(t, out["error"], "larger than 4096 bytes")

	for _, tc := range []struct{ body, want string }{
		{`{"hello": "world"}`, "not a session export"},
		{`[1, 2, 3]`, "not a session export"},
		{`{"format": "planround.session/v2", "session": {"id": "x"}, "messages": [{"role": "wizard", "content": "hi"}]}`, "not a session export"},
		{`{"format": "planround.session/v2"`, "not a session export"},
		{``, "empty request body"},
		{" \n ", "empty request body"},
	} {
		status, out := importAs(t, h.client, h.ts.URL, []byte(tc.body))
		assert.Equal(t, http.StatusBadRequest, status, "%q: %v", tc.body, out)
		assert.Contains(t, out["error"], tc.want, "%q", tc.body)
		assert.Equal(t, false, out["success"])
	}

	resp, err := h.client.Post(h.ts.URL+"/api/sessions/import", "text/plain", bytes.NewReader(doc))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	status, body := getAs(t, h.client, h.ts.URL+"/api/sessions/import")
	assert.Equal(t, http.StatusMethodNotAllowed, status, body)

	assert.Equal(t, []string{s}, ids(listSessions(t, h.client, h.ts.URL)), "no refused import stored anything")
	all, err := h.srv.store.Sessions(t.Context())
	require.NoError(t, err)
	assert.Len(t, all, 1)
}

// TestImportedTitle: an imported copy's title says so once, within the
// length of a title.
func TestImportedTitle(t *testing.T) {
	assert.Equal(t, "Trip (imported)", importedTitle("Trip"))
	assert.Equal(t, "Trip (imported)", importedTitle("Trip (imported)"), "not twice")
	assert.Equal(t, "(imported)", importedTitle(""))
	long := importedTitle(strings.Repeat("word ", 40))
	assert.Equal(t, maxTitleLen, len([]rune(long)))
	assert.True(t, strings.HasSuffix(long, "… (imported)"), long)
}

// TestCleanTitle: titles on one line, cut to maxTitleLen characters; a
// clean title stays as it is.
func TestCleanTitle(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"  \n\t ":                   "",
		"Hello":                     "Hello",
		" a\r\nb\x00c\u2028d  ":     "a b c d",
		strings.Repeat("é", 200):    strings.Repeat("é", maxTitleLen-1) + "…",
		strings.Repeat("ab ", 100):  strings.TrimSpace(strings.Repeat("ab ", 40)) + "…",
		strings.Repeat("x", 120):    strings.Repeat("x", 120),
		strings.Repeat("x", 121):    strings.Repeat("x", 119) + "…",
		"<script>alert(1)</script>": "<script>alert(1)</script>", // shown as text by the page
		spoofed:                     "Report gnp.exe abc invoice",
		"\u202E\u2066 \u200B":       "",
		"שלום عالم 日本 🙂 é":          "שלום عالم 日本 🙂 é", // other scripts stay
	} {
		assert.Equal(t, want, cleanTitle(in), "%q", in)
		assert.Equal(t, want, cleanTitle(want), "%q cleaned again", in)
	}
}

// spoofed holds the format characters a title could hide behind: a right-to-left
// override (the name reads "Report exe.png"), the isolates U+2066..U+2069,
// a zero-width space, a zero-width joiner and a byte order mark.
const spoofed = "Report \u202Egnp.exe\u202C \u2066a\u2067b\u2068c\u2069 in\u200Bvoice\u200D\uFEFF"

// TestTitlesWithoutFormatCharacters: a session title, whether a first
// message, a rename or an import sets it, keeps no format character
// (category Cf), and keeps every other character.
func TestTitlesWithoutFormatCharacters(t *testing.T) {
	leaktest.Check(t)
	const want = "Report gnp.exe abc invoice"
	h := newHarness(t, Options{})
	noFormat := func(what, title string) {
		t.Helper()
		assert.Equal(t, want, strings.TrimSuffix(strings.TrimPrefix(title, "Renamed "), importedSuffix), what)
		for _, r := range title {
			assert.False(t, unicode.Is(unicode.Cf, r), "%s: %q keeps %U", what, title, r)
		}
	}

	// A first message.
	s := h.newSession(t)
	h.converse(t, s, spoofed)
	list := listSessions(t, h.client, h.ts.URL)
	require.Len(t, list, 1)
	noFormat("titled by its first message", list[0].Title)

	// A rename.
	status, out := h.post(t, "/api/sessions/rename", mustString(map[string]string{"session_id": s, "title": "Renamed " + spoofed}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	title := listSessions(t, h.client, h.ts.URL)[0].Title
	assert.True(t, strings.HasPrefix(title, "Renamed "), title)
	noFormat("renamed", title)
	status, out = h.post(t, "/api/sessions/rename", mustString(map[string]string{"session_id": s, "title": "\u202E\u200B\uFEFF"}))
	assert.Equal(t, http.StatusBadRequest, status, "a title of format characters only is blank: %v", out)

	// An import of a document whose title has them.
	require.NoError(t, h.srv.store.RenameSession(t.Context(), s, spoofed))
	doc, err := memory.Export(t.Context(), h.srv.store, s)
	require.NoError(t, err)
	require.Contains(t, string(doc), "\u202e", "the export keeps the title as stored (escaped)")
	status, out = importAs(t, h.client, h.ts.URL, doc)
	require.Equal(t, http.StatusOK, status, "%v", out)
	title, _ = out["title"].(string)
	noFormat("the import's answer", title)
	sess, err := h.srv.store.Session(t.Context(), out["session_id"].(string))
	require.NoError(t, err)
	noFormat("the imported session", sess.Title)
}

// FuzzImportEndpoint: any body posted to /api/sessions/import is imported
// as a session of the poster's browser or refused with a 4xx and a JSON
// error; nothing panics, nothing is stored under another owner.
func FuzzImportEndpoint(f *testing.F) {
	srv, err := NewServer(Options{Model: "m", BaseURL: "http://127.0.0.1:1/v1", MaxImportSize: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	ctx := f.Context()
	src := new(memory.MemStore)
	src.CreateSession(ctx, memory.Session{ID: "x", Title: "t\nitle"})
	src.Append(ctx, "x",
		memory.Message{Role: memory.RoleUser, Content: "hi", Images: []memory.Image{{MIMEType: "image/png", Data: []byte("png")}}},
		memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c", Name: "f", Arguments: []byte(`{"a":1}`)}}},
		memory.Message{Role: memory.RoleTool, ToolCallID: "c", Content: "ok"},
	)
	good, err := memory.Export(ctx, src, "x")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"planround.session/v2","session":{"id":"../x"},"messages":[],"summaries":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	owner := httptest.NewRequest(http.MethodGet, "/", nil)
	owner.AddCookie(&http.Cookie{Name: ownerCookie, Value: secret})
	tag, _ := ownerTag(owner)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/sessions/import", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: ownerCookie, Value: secret})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var out struct {
			Success   bool   `json:"success"`
			SessionID string `json:"session_id"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d: the answer is not JSON: %q", rec.Code, rec.Body.String())
		}
		switch rec.Code {
		case http.StatusOK:
			if !out.Success || sessionOwner(out.SessionID) != tag {
				t.Fatalf("imported as %q, not a session of the poster: %+v", out.SessionID, out)
			}
			sess, err := srv.store.Session(t.Context(), out.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if sess.Title != cleanTitle(sess.Title) {
				t.Fatalf("title %q not cleaned", sess.Title)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if out.Success || out.Error == "" {
				t.Fatalf("status %d without an error: %+v", rec.Code, out)
			}
		default:
			t.Fatalf("status %d: %+v", rec.Code, out)
		}
		all, err := srv.store.Sessions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if sessionOwner(s.ID) != tag {
				t.Fatalf("a session stored under another owner: %q", s.ID)
			}
		}
	})
}

// TestDeleteEndsPerConversationMCP: deleting a session ends its instance of
// a per_conversation MCP server; another session's instance runs on.
func TestDeleteEndsPerConversationMCP(t *testing.T) {
	leaktest.Check(t)
	bin := stdioServer(t)
	h := newMCPHarness(t, toolModel(t, toolCall{"pid", `{}`}),
		mcpclient.ServerConfig{Name: "sandbox", Command: bin, Isolation: mcpclient.IsolationPerConversation,
			DisabledTools: only("pid"), SkipApproval: true},
	)
	instance := func(session string) int {
		t.Helper()
		ev, _ := h.openEvents(t, session)
		defer ev.close()
		h.chat(t, session, "which process are you?")
		done, chunks := ev.runDone(t)
		require.Equal(t, "finished", done.Status, "%+v", done)
		for _, c := range chunks {
			if c.Kind == agent.KindToolCall && c.Tool.Name == "pid" && c.Tool.State == agent.StateResult {
				pid, err := strconv.Atoi(strings.TrimSpace(c.Tool.Result))
				require.NoError(t, err, c.Tool.Result)
				return pid
			}
		}
		t.Fatal("no pid result")
		return 0
	}
	s1, s2 := h.newSession(t), h.newSession(t)
	p1, p2 := instance(s1), instance(s2)
	require.NotEqual(t, p1, p2)
	require.True(t, alive(p1))

	status, out := h.post(t, "/api/sessions/delete", mustString(map[string]string{"session_id": s1}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	gone(t, p1, "the deleted session's MCP server")
	assert.True(t, alive(p2), "another session's instance runs on")
	assert.Equal(t, p2, instance(s2))
}

// TestSessionEndpointsRefuseCrossSite: a page of another site cannot
// rename, delete or import through the user's browser (CSRF), and a GET of
// the export from another site carries no owner cookie (SameSite=Strict):
// the server sees no owner.
func TestSessionEndpointsRefuseCrossSite(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s := h.newSession(t)
	h.converse(t, s, "Hello!")
	doc, err := memory.Export(t.Context(), h.srv.store, s)
	require.NoError(t, err)
	for _, tc := range []struct{ path, body string }{
		{"/api/sessions/rename", mustString(map[string]string{"session_id": s, "title": "pwned"})},
		{"/api/sessions/delete", mustString(map[string]string{"session_id": s})},
		{"/api/sessions/import", string(doc)},
	} {
		for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}} {
			req, err := http.NewRequest(http.MethodPost, h.ts.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := h.client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "POST %s with %v", tc.path, hdr)
		}
	}
	list := listSessions(t, h.client, h.ts.URL)
	assert.Equal(t, []string{s}, ids(list), "nothing deleted, nothing imported")
	assert.Equal(t, "Hello!", list[0].Title, "nothing renamed")
}
