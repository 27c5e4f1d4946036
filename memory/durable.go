package memory

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The interfaces of durable runs: see "Durable runs" in the package doc.

// OpenCall is the durable state of a tool call whose tool message is not in
// the history yet: a call waiting for its approval, or running. The
// assistant message that asks for the call is stored with the record
// ([CallLog.AppendCalls]) or before it.
type OpenCall struct {
	// MessageID is the id of the stored assistant message that holds the
	// call, and CallID the call's id in it ([ToolCall.ID]); together they
	// name the record.
	MessageID int64  `json:"message_id"`
	CallID    string `json:"call_id"`
	// Round is the tool round of the call.
	Round int `json:"round"`
	// ApprovalID is the id of the call's approval, once requested.
	ApprovalID string `json:"approval_id,omitempty"`
	// Executing is set just before the tool starts: a call found executing
	// without its tool message stopped while it ran and is never run again.
	Executing bool `json:"executing,omitempty"`
	// Partial is the output the running tool had written when it was last
	// saved.
	Partial string `json:"partial,omitempty"`
	// State is what the running tool saved to take the call up again
	// after its process stopped (agent.SaveCallState), such as the id of
	// the task an MCP server runs the call as: opaque to the store, kept
	// byte for byte, at most [MaxCallState] bytes.
	State string `json:"state,omitempty"`
	// Arguments are the arguments the call runs with, when an approver
	// edited them: [CallLog.SaveCall] writes them over the call's
	// arguments in its stored assistant message ([ToolCall.Arguments]),
	// so that the history says what ran. They must be a JSON object. Empty
	// leaves the message as it is. They are not part of the record:
	// [CallLog.OpenCalls] returns records without them, and the message
	// holds them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// UpdatedAt is when the record was last saved; the store sets it.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// MaxCallState is the most bytes an [OpenCall.State] may hold.
const MaxCallState = 4096

// CallLog is implemented by stores that keep [OpenCall] records.
//
// Append removes, in its transaction, the record of every call that an
// appended tool message answers (the session's records with that
// [Message.ToolCallID]); DeleteSession removes a session's records.
type CallLog interface {
	// AppendCalls appends msgs as [Store.Append] does and, in the same
	// transaction, saves a record for each of calls, whose MessageID it
	// sets to the new id of the last of msgs: all of it or none. So a
	// stored call is never without its record, wherever the process that
	// stores it stops, and a sweeper that lists [CallLog.OpenSessions]
	// finds every turn left with open calls. The last of msgs must be an
	// assistant message and each record name one of its [Message.ToolCalls]
	// once and have no Arguments (see [ValidateAppendCalls]); the
	// records' MessageID passed in is ignored.
	AppendCalls(ctx context.Context, sessionID string, calls []OpenCall, msgs ...Message) ([]Message, error)
	// SaveCall inserts the record of (c.MessageID, c.CallID) in the
	// session, or replaces it. The session must exist ([ErrNotFound]).
	// When c.Arguments is not empty it also sets, in the same
	// transaction, the arguments of the call c.CallID in the session's
	// assistant message c.MessageID to c.Arguments, leaving the message's
	// other calls as they were; a message that is not the session's or
	// holds no such call is an error, and nothing changes.
	SaveCall(ctx context.Context, sessionID string, c OpenCall) error
	// OpenCalls returns the session's records, by MessageID and then in
	// the order they were first saved.
	OpenCalls(ctx context.Context, sessionID string) ([]OpenCall, error)
	// OpenSessions returns the ids of the sessions that have records,
	// in no particular order.
	OpenSessions(ctx context.Context) ([]string, error)
}

// Approval is the durable record of one approval: a tool call waiting for a
// person's decision, or decided.
type Approval struct {
	// ID is the approval id a front end answers with. Required, unique.
	ID string `json:"id"`
	// SessionID is the session of the run; only a decision for this
	// session is taken. Required.
	SessionID string `json:"session_id"`
	// CallID, Tool, Arguments and Round describe the call.
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Round     int             `json:"round"`
	// Kind is what waits: [KindApproval] (also when empty) for a tool
	// call's approval, [KindForm] for a form a tool asks the user to fill
	// in. Approvals and forms are kept alike.
	Kind string `json:"kind,omitempty"`
	// Key, when not empty, names the call the record belongs to durably
	// (agent.ApprovalRequest.Key): a session has at most one record per
	// key, and [ApprovalStore.ApprovalByKey] finds it.
	Key string `json:"key,omitempty"`
	// Digest is agent.ArgumentsDigest of Arguments as the person deciding
	// sees them; a decision names it to say what it decides. Records that
	// a version before digests stored have none: the runner's approvals
	// bind a decision on one to the digest of its Arguments.
	Digest string `json:"digest,omitempty"`
	// CreatedAt is set by the store when zero.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Decided is set once a decision is taken; Decision and DecidedAt
	// are then set.
	Decided   bool             `json:"decided,omitempty"`
	Decision  ApprovalDecision `json:"decision,omitzero"`
	DecidedAt time.Time        `json:"decided_at,omitzero"`
}

// ApprovalDecision is the decision of an [Approval], in the store's own
// vocabulary (package approval converts it to and from agent.Decision).
type ApprovalDecision struct {
	Approved  bool            `json:"approved"`
	Reason    string          `json:"reason,omitempty"`
	Cause     string          `json:"cause,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Scope     string          `json:"scope,omitempty"`
	// Principal is who decided, for the audit: the principal of a person
	// as the host's authentication names it, "policy:<name>", "timeout"
	// or "system".
	Principal string `json:"principal,omitempty"`
	// Channel is what the decision came through: "http", "terminal",
	// "policy", "timeout", "system", or a host's own.
	Channel string `json:"channel,omitempty"`
}

// The kinds of an [Approval] record.
const (
	KindApproval = "approval"
	KindForm     = "form"
)

// MaxApprovalKey is the longest [Approval.Key], in bytes.
const MaxApprovalKey = 512

// DecisionQuery selects decided records for [ApprovalStore.Decisions].
type DecisionQuery struct {
	// SessionID, when not empty, selects one session's records.
	SessionID string
	// Kind, when not empty, selects the records of one kind
	// ([KindApproval] also selects records stored with an empty Kind).
	Kind string
	// Since and Until bound DecidedAt: Since <= DecidedAt < Until; a zero
	// time leaves that end open.
	Since, Until time.Time
	// AfterID continues a listing: with it, a record decided exactly at
	// Since is returned only when its ID sorts after AfterID. A caller
	// that pages sets Since to the last record's DecidedAt and AfterID to
	// its ID.
	AfterID string
	// Limit, when positive, is the most records returned.
	Limit int
}

// Errors of an [ApprovalStore].
var (
	// ErrDecided is returned (wrapped) by DecideApproval for an approval
	// that already has a decision; the first decision stays.
	ErrDecided = errors.New("memory: approval already decided")
	// ErrWrongSession is returned (wrapped) by DecideApproval for an
	// approval of another session; it stays as it was.
	ErrWrongSession = errors.New("memory: approval belongs to another session")
)

// ApprovalStore is implemented by stores that keep [Approval] records.
// Approvals do not need their session to exist in the Store; DeleteSession
// removes the session's approvals. Every method that returns records
// returns them whole: each field as CreateApproval and DecideApproval
// stored it, times in UTC.
type ApprovalStore interface {
	// CreateApproval stores a, which must be valid ([ValidateApproval]).
	// An existing id is an error wrapping [ErrExists], and so is a
	// non-empty Key that a's session already has (another session may use
	// the same key). A pending record (Decided false) is stored without a
	// decision: its Decision and DecidedAt are ignored. A record created
	// decided (a decision taken without asking anybody, kept for the
	// audit) is stored with its Decision, decided at a.DecidedAt, or now
	// when that is zero; it is never pending. CreatedAt is set to now when
	// zero.
	CreateApproval(ctx context.Context, a Approval) error
	// DecideApproval takes the decision of the pending approval id of
	// sessionID, atomically: of concurrent deciders, across processes,
	// exactly one succeeds. It returns the stored approval. An unknown id
	// wraps [ErrNotFound], another session's [ErrWrongSession], a decided
	// one [ErrDecided] (and returns it, with the decision that stands).
	DecideApproval(ctx context.Context, sessionID, id string, d ApprovalDecision) (Approval, error)
	// GetApproval returns one approval; an unknown id wraps [ErrNotFound].
	GetApproval(ctx context.Context, id string) (Approval, error)
	// PendingApprovals returns the approvals of sessionID that have no
	// decision, oldest first; an empty sessionID returns those of every
	// session.
	PendingApprovals(ctx context.Context, sessionID string) ([]Approval, error)
	// ApprovalByKey returns the record of sessionID whose [Approval.Key]
	// is key, pending or decided. No such record, and an empty key, are
	// errors wrapping [ErrNotFound].
	ApprovalByKey(ctx context.Context, sessionID, key string) (Approval, error)
	// Decisions returns the decided records that q selects (see
	// [DecisionQuery]), ordered by DecidedAt and then by ID (byte-wise),
	// at most q.Limit of them when it is positive. Pending records are
	// never returned. A listing without a match is empty, not an error.
	Decisions(ctx context.Context, q DecisionQuery) ([]Approval, error)
}

// MaxNotifyPayload is the largest payload a [Notifier] must carry, in
// bytes (PostgreSQL's NOTIFY takes a little less than 8000).
const MaxNotifyPayload = 7000

// Notifier carries short notes between the processes that share a store,
// such as "approval X was decided". Delivery is at most once and only to
// listeners that were listening when the note was sent: a note is a hint
// to look at the store, never the only copy of anything.
type Notifier interface {
	// Notify sends payload (not empty, at most [MaxNotifyPayload] bytes of
	// text: PostgreSQL refuses invalid UTF-8 and NUL bytes) to the
	// listeners of channel, in this process and the others.
	Notify(ctx context.Context, channel, payload string) error
	// Listen calls fn with the payload of every note sent to channel from
	// now until stop is called. An empty payload (never sent by Notify,
	// which refuses one) says that notes may have been lost, as after the
	// connection to another process was lost and made again: the listener
	// looks at the store. fn is called from one goroutine at a time,
	// in the order the notes were sent by each sender; it must not block
	// for long. Once stop has returned, fn is not called again. stop must
	// not be called from fn.
	Listen(ctx context.Context, channel string, fn func(payload string)) (stop func(), err error)
}

// Leaser grants a lease on a session to one holder at a time: the process
// that holds it drives the session's run. A lease that its holder does not
// renew expires, so a process that died releases its sessions after at most
// one ttl.
type Leaser interface {
	// AcquireLease gives the lease of sessionID to holder for ttl, unless
	// another holder has one that has not expired; holder renews its own
	// lease the same way. It reports whether holder now holds the lease.
	AcquireLease(ctx context.Context, sessionID, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease ends holder's lease of sessionID; releasing a lease
	// that holder does not hold does nothing.
	ReleaseLease(ctx context.Context, sessionID, holder string) error
}
