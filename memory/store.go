package memory

import (
	"context"
	"errors"
)

// ErrNotFound is returned (wrapped) by a [Store] for an unknown session.
var ErrNotFound = errors.New("memory: session not found")

// ErrExists is returned (wrapped) by [Store.CreateSession] and [Import] when
// a session with the same id already exists.
var ErrExists = errors.New("memory: session already exists")

// Store keeps sessions, their messages and their long-term summaries.
//
// Implementations must be safe for concurrent use by several goroutines and
// several sessions. Every method that names a session returns an error
// wrapping [ErrNotFound] when it does not exist. Every method returns an
// error when ctx is already done. Returned values are copies: changing them
// never changes what is stored. Times come back in UTC with at least
// microsecond precision ([MemStore] and the SQLite store keep nanoseconds).
// The functions an implementation calls (the checks of its input, session
// ids, copies) are in this package, and its documentation's "For store
// authors" says which method calls what; package memory/storetest holds a
// conformance suite every implementation should pass.
type Store interface {
	// CreateSession creates a session. An empty ID gets a generated one;
	// a zero CreatedAt gets the current time, a zero UpdatedAt the
	// CreatedAt. It returns the stored session. Creating an existing id is
	// an error wrapping [ErrExists].
	CreateSession(ctx context.Context, s Session) (Session, error)
	// Session returns one session.
	Session(ctx context.Context, id string) (Session, error)
	// Sessions lists all sessions, most recently updated first.
	Sessions(ctx context.Context) ([]Session, error)
	// RenameSession sets a session's title.
	RenameSession(ctx context.Context, id, title string) error
	// DeleteSession removes a session with its messages and summaries.
	DeleteSession(ctx context.Context, id string) error

	// Append adds messages at the end of a session, atomically: all of them
	// or none. It returns them with ID (increasing in append order, never
	// reused) and CreatedAt (when zero) filled in, and sets the session's
	// UpdatedAt. What [ValidateMessages] refuses is an error: an invalid
	// Role, a non-zero SummaryID (archiving is [Store.Summarize]'s job),
	// tool-call arguments that are not a JSON object. The ID of the
	// messages passed in is ignored.
	Append(ctx context.Context, sessionID string, msgs ...Message) ([]Message, error)
	// Messages returns a session's messages in append order: only the
	// active ones, or with archived ones too when all is true.
	Messages(ctx context.Context, sessionID string, all bool) ([]Message, error)

	// Summarize stores a summary and archives, in the same transaction, the
	// active messages with ids in [s.FirstID, s.LastID] by setting their
	// SummaryID. It returns the stored summary with its ID (never zero,
	// never reused) and CreatedAt (when zero) filled in. Empty content, an
	// empty range, or a range holding no active message of the session is
	// an error and changes nothing.
	Summarize(ctx context.Context, sessionID string, s Summary) (Summary, error)
	// Summaries returns a session's summaries, oldest first.
	Summaries(ctx context.Context, sessionID string) ([]Summary, error)
}
