// Package storekit holds what the author of a [memory.Store] calls inside
// it: the checks every store makes before it writes, the id of a session
// created without one, and deep copies of messages. A program that only
// uses a store never needs it; package memory is its API, as database/sql
// is beside database/sql/driver.
//
// Every store shipped with planround ([memory.MemStore], memory/sqlitestore,
// memory/pgstore) calls these same functions, so every store refuses the
// same input with the same error, and a program that moves from one store
// to another sees no new error. The conformance suite in package
// memory/storetest checks a store against the contract written on
// [memory.Store] and on the optional interfaces.
//
// # What a Store does
//
// A [memory.Store] is safe for concurrent use. Every method returns an
// error when its ctx is already done, and an error wrapping
// [memory.ErrNotFound] for a session that does not exist. What it returns
// are copies: changing them never changes what is stored. Times come back
// in UTC. Each method that writes checks its input first, with the
// function named below, and changes nothing when the check fails:
//
//   - CreateSession: call [ValidateSession]; give a session without an id
//     [NewSessionID]; a zero CreatedAt is now, a zero UpdatedAt the
//     CreatedAt; an existing id is an error wrapping [memory.ErrExists].
//   - Append: call [ValidateMessages] before writing anything, then write
//     all the messages or none. A store that keeps messages in memory
//     stores [CloneMessages] of them and returns CloneMessages of what it
//     keeps, so that neither its caller nor it sees the other's changes.
//   - Summarize: call [ValidateSummary].
//
// # The optional interfaces
//
// A store that keeps durable runs implements the optional interfaces of
// package memory, each with its check:
//
//   - [memory.CallLog]: [ValidateOpenCall] in SaveCall, [ValidateAppendCalls]
//     in AppendCalls (it checks the messages with ValidateMessages too);
//   - [memory.ApprovalStore]: [ValidateApproval] in CreateApproval;
//   - [memory.Notifier]: [ValidateNote] in Notify;
//   - [memory.EventLog]: [ValidateEvents] in AppendEvents, before the store
//     checks that the events continue the log ([memory.ErrEventSeq]);
//   - [memory.KV]: [ValidateKV] in every method, with a nil value for
//     GetValue and DeleteValue;
//   - [memory.APILog]: [ValidateAPICall] in AppendAPICall.
//
// [memory.Leaser] has nothing to check beyond its arguments.
//
// # What stays in package memory
//
// Three helpers that stores rely on stay in package memory, because hosts,
// the agent and package approval call them too: [memory.ValidateImage],
// which ValidateMessages applies to every image and a host to an image a
// user sends; [memory.ValidArguments], which makes tool-call arguments the
// JSON object ValidateMessages requires; and [memory.IsObject], which says
// whether they are one.
//
// # Conformance
//
// A store author runs storetest.Run from an ordinary test, and, for the
// optional interfaces the store implements, storetest.RunDurable,
// storetest.RunKV, storetest.RunAPILog, and, when several processes share
// the store, storetest.RunNotifierPair, storetest.RunEventLogPair and
// storetest.RunKVPair (see package memory/storetest).
package storekit
