package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/demo"
	"github.com/planround/planround/internal/leaktest"
)

// getAudit reads GET /api/audit for session as client's browser.
func getAudit(t *testing.T, client *http.Client, base, session string) (int, auditResponse) {
	t.Helper()
	status, body := getAs(t, client, base+"/api/audit?session_id="+session)
	var out auditResponse
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal([]byte(body), &out), "%s", body)
	}
	return status, out
}

// readOnlyTime returns tools with get_time's hints set, as its host's own
// word: it only reads, in a closed world.
func readOnlyTime(tools []agent.Tool) []agent.Tool {
	for i, tool := range tools {
		if ft, ok := tool.(agent.FuncTool); ok && ft.Def.Name == "get_time" {
			ft.Def.Hints = &agent.ToolHints{ReadOnly: true, Trusted: true}
			tools[i] = ft
		}
	}
	return tools
}

// TestAudit: GET /api/audit lists a session's decisions oldest first, each
// kind with who took it and through what: the browser's (its principal,
// http, with the edited arguments), a policy's (the runner's), an
// interruption's and a timeout's; "you" is the asking browser's principal.
func TestAudit(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{ApprovalTimeout: 2 * time.Second, TrustHints: true, Tools: readOnlyTime(demo.Tools())})
	s := h.newSession(t)
	ev, _ := h.openEvents(t, s)

	// A person approves, with an edit.
	h.chat(t, s, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	status, out := h.post(t, "/api/tool-approve", approveBody(s, call, true, map[string]any{"arguments": map[string]string{"city": "Rome"}}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["success"], "%v", out)
	done, _ := ev.runDone(t)
	require.Equal(t, "finished", done.Status)

	// A policy decides (the server's runner's, Config.Policies): get_time
	// says, with hints the host trusts, that it only reads.
	h.chat(t, s, "What time is it in Europe/Oslo?")
	timed, _ := ev.untilState(t, agent.KindToolCall, agent.StateResult)
	require.Equal(t, "get_time", timed.Name)
	done, _ = ev.runDone(t)
	require.Equal(t, "finished", done.Status)

	// An interruption cancels the pending approval.
	h.chat(t, s, "What's the weather in Oslo?")
	ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	status, out = h.post(t, "/api/interrupt", mustString(map[string]string{"session_id": s}))
	require.Equal(t, http.StatusOK, status, "%v", out)
	done, _ = ev.runDone(t)
	require.Equal(t, "interrupted", done.Status)

	// Nobody answers: the approval times out.
	h.chat(t, s, "What's the weather in Lima?")
	ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	done, _ = ev.runDone(t)
	require.Equal(t, "rejected", done.Status)
	require.Equal(t, agent.CauseTimeout, done.Cause)

	status, audit := getAudit(t, h.client, h.ts.URL, s)
	require.Equal(t, http.StatusOK, status)
	you := principalOf(sessionOwner(s))
	assert.Equal(t, you, audit.You)
	assert.Regexp(t, `^browser:[0-9a-f]{16}$`, you)
	type row struct{ Tool, By, Via, Edit string }
	var got []row
	for _, r := range audit.Decisions {
		assert.Equal(t, s, r.SessionID)
		assert.False(t, r.Decided.Before(r.Asked), "%+v", r)
		got = append(got, row{r.Tool, r.Decision.By, r.Decision.Via, string(r.Decision.Arguments)})
	}
	assert.Equal(t, []row{
		{"get_weather", you, approval.ViaHTTP, `{"city":"Rome"}`},
		{"get_time", "policy:read-only-hints", approval.ViaPolicy, ""},
		{"get_weather", "system", approval.ViaSystem, ""},
		{"get_weather", "timeout", approval.ViaTimeout, ""},
	}, got)
	require.Len(t, audit.Decisions, 4)
	assert.True(t, audit.Decisions[0].Decision.Approved)
	assert.Equal(t, call.ApprovalID, audit.Decisions[0].ApprovalID)
	assert.Equal(t, call.ArgumentsDigest, audit.Decisions[0].ArgumentsDigest)
	assert.True(t, audit.Decisions[1].Decision.Approved)
	assert.False(t, audit.Decisions[2].Decision.Approved)
	assert.False(t, audit.Decisions[3].Decision.Approved)
	assert.Equal(t, agent.CauseTimeout, audit.Decisions[3].Decision.Cause)
}

// TestAuditOwnerScoped: only the session's browser reads its audit trail;
// another browser's own sessions show none of it, and a session without
// decisions has an empty list.
func TestAuditOwnerScoped(t *testing.T) {
	leaktest.Check(t)
	h := newHarness(t, Options{})
	s := h.newSession(t)
	ev, _ := h.openEvents(t, s)
	h.chat(t, s, "What's the weather in Paris?")
	call, _ := ev.untilState(t, agent.KindToolCall, agent.StateApprovalRequired)
	h.decide(t, s, call, false)
	ev.runDone(t)

	status, mine := getAudit(t, h.client, h.ts.URL, s)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, mine.Decisions, 1)

	other := h.newBrowser(t)
	status, body := getAs(t, other, h.ts.URL+"/api/audit?session_id="+s)
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.NotContains(t, body, "get_weather")
	noCookie := &http.Client{}
	status, body = getAs(t, noCookie, h.ts.URL+"/api/audit?session_id="+s)
	assert.Equal(t, http.StatusUnauthorized, status, body)
	assert.NotContains(t, body, "get_weather")
	status, body = getAs(t, h.client, h.ts.URL+"/api/audit?session_id=not%20an%20id")
	assert.Equal(t, http.StatusBadRequest, status, body)

	theirs := postSession(t, other, h.ts.URL)
	status, out := getAudit(t, other, h.ts.URL, theirs)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, out.Decisions)
	assert.NotEqual(t, mine.You, out.You, "each browser has its principal")
	_, again := getAudit(t, h.client, h.ts.URL, h.newSession(t))
	assert.Empty(t, again.Decisions, "another session of the same browser")
}
