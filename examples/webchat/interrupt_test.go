package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/planround/planround/internal/leaktest"
)

// TestInterruptIdle: interrupting a session where nothing runs, whether it
// ran a turn or never did, or whose id is one this browser may own but
// that does not exist, answers {"success":true,"was_active":false} (the
// page finishes at once). Another browser's session, idle too, is refused
// and nothing of it is told.
func TestInterruptIdle(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	used := h.newSession(t)
	ev, _ := h.openEvents(t, used)
	h.chat(t, used, "Hello!")
	done, _ := ev.runDone(t)
	assert.Equal(t, "finished", done.Status)
	unused := h.newSession(t)
	missing := sessionOwner(unused) + "-0000000000000000"
	idle := map[string]any{"success": true, "was_active": false, "cancelled": float64(0)}
	for name, id := range map[string]string{"after a turn": used, "never used": unused, "no such session": missing} {
		status, out := h.post(t, "/api/interrupt", mustString(map[string]string{"session_id": id}))
		assert.Equal(t, http.StatusOK, status, "%s: %v", name, out)
		assert.Equal(t, idle, out, name)
	}

	other := h.newBrowser(t)
	for name, id := range map[string]string{"another browser's idle session": used, "another browser's missing session": missing} {
		status, out := postAs(t, other, h.ts.URL, "/api/interrupt", mustString(map[string]string{"session_id": id}))
		assert.Equal(t, http.StatusForbidden, status, "%s: %v", name, out)
		assert.Equal(t, false, out["success"], name)
		assert.NotContains(t, out, "was_active", name)
	}
}
