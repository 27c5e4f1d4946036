// Package jsonapi serves planround's sessions over a small JSON and
// Server-Sent Events protocol: the web chat's (examples/webchat), as a
// library. A client sends a message, follows the session's events from a
// cursor, loads the history with the calls that wait, decides approvals,
// answers forms, stops a turn, and lists, makes, renames and deletes its
// sessions. The turns run on a runner.Runner, so every guarantee of the
// runner holds: a turn does not depend on the request that started it, a
// decision taken on any process resumes it, a client that reconnects with
// its cursor misses nothing and gets nothing twice.
//
//	h, err := jsonapi.NewHandler(ui.Config{Runner: r, Authorize: owner}, jsonapi.Options{})
//	mux.Handle("/api/", http.StripPrefix("/api", h))
//
// Every request that names a session goes through ui.Config.Authorize (401
// for an error wrapping ui.ErrUnauthenticated, 403 for another), and the
// principal it returns is the By of the decisions and answers the audit
// records (Via "http"). A session id is 1 to 64 letters, digits, '-' or
// '_' (CheckSessionID). What a host adds to the protocol (its page's
// settings, the skills or resources a message names, who owns which
// session, per-user limits) goes through Options, or through handlers of
// its own mounted beside this one.
//
// # Wire protocol
//
// The paths are relative to where the host mounts the handler. Bodies are
// JSON (Content-Type: application/json, at most ui.Config.MaxBodyBytes:
// 413 beyond; 400 for malformed JSON or a missing field, 415 for another
// type, 405 for another method). Answers are JSON, most of them
// {"success":bool,"error":"..."}.
//
//	POST /chat {"session_id","message", ...}
//	    Starts a turn (Options.Prepare sees the whole body first).
//	    202 {"success":true}: the message is stored, the turn's events go
//	    to the event streams. 409: a turn runs in the session (here or on
//	    another process). 503: too many runs (Retry-After), or shutting down.
//
//	GET /events?session_id=S[&after=N]   (or the Last-Event-ID header)
//	    The session's events as Server-Sent Events. First a hello event
//	    {"busy","turn"?,"seq","replay", ...Options.Hello}: whether a turn
//	    runs, the Seq of its run_started, of the log's last event, and
//	    whether the logged events after N come next. Without N (or with one
//	    beyond the log's end), what waits for the person is drawn again
//	    first: an approval_required chunk per pending approval, and per open
//	    form its call's executing chunk and its form_request side chunk.
//	    Then every event of the session's turns, each with its Seq as its
//	    SSE id: run_started {message?,resumed?,history}, the chunks
//	    (unnamed events, agent.Chunk's JSON), run_done
//	    {status,reason?,cause?,error?,turn}, session_deleted {} (the stream
//	    ends). When the log no longer holds the events after N: reload {},
//	    and the stream ends (load the history again). Idle streams get a
//	    comment every Options.KeepAlive.
//
//	GET /history?session_id=S
//	    The stored messages, oldest first ([]HistoryEntry), with the open
//	    calls of each assistant message (OpenCall: a call that waits for
//	    its approval has the state "approval", an approval id, its tool and
//	    arguments digest; an executing call shows its open form). Header
//	    X-Session-Seq: the Seq to follow the events after; X-Session-Running:
//	    "true" while a turn runs (the messages end where it started).
//
//	POST /tool-approve {"session_id","approval_id","call_id","tool",
//	                    "arguments_digest","approved","reason"?,
//	                    "arguments"?,"scope"?}          (DecideRequest)
//	    200 {"success":true}: taken. 200 {"success":false,"error"}: not
//	    pending (a stale card). 409: the call named is not the approval's
//	    (it stays pending). 403: an approval of another session.
//
//	POST /form-answer {"session_id","form_id","answers"}          (AnswerRequest)
//	               or {"session_id","form_id","action","content"?}
//	    200 {"success":true}: taken. 200 {"success":false,"error"}: not
//	    open. 400: answers that do not fit the form.
//
//	POST /interrupt {"session_id"}
//	    Stops the session (runner.Runner.Stop: its turn interrupted
//	    wherever it runs, its approvals and forms cancelled).
//	    200 {"success":true,"was_active":bool,"cancelled":n} (StopResponse)
//
//	GET /sessions
//	    The caller's stored sessions, most recently updated first
//	    ([]SessionEntry: id, title?, created_at, updated_at, busy?).
//	POST /sessions {}
//	    200 {"success":true,"session_id":"..."}: a new session id.
//	POST /sessions/rename {"session_id","title"}
//	    200; 400 for a blank title; 404 for a session never stored.
//	POST /sessions/delete {"session_id"}
//	    200: deleted, its event streams get session_deleted; 404 for a
//	    session never stored; 409 while a turn runs in it.
package jsonapi
