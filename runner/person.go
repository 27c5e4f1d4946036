package runner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/approval"
	"github.com/planround/planround/interact"
	"github.com/planround/planround/internal/person"
	"github.com/planround/planround/memory"
)

// people is what New builds for the person in the loop: the approvals and
// the forms, on the Runner's Store.
type people struct {
	approvals *person.Approvals
	forms     *person.Forms
}

// newPerson builds the approvals and forms of cfg on cfg.Store: with its
// Notifier when it has one, so that a decision or an answer taken in any
// process reaches the run that waits for it.
func newPerson(cfg Config) (people, error) {
	mcfg := person.ApprovalsConfig{Timeout: cfg.ApprovalTimeout, SuspendAfter: cfg.SuspendAfter}
	fcfg := person.FormsConfig{Timeout: cfg.FormTimeout, SuspendAfter: cfg.SuspendAfter}
	if as, ok := cfg.Store.(memory.ApprovalStore); ok {
		mcfg.Store, fcfg.Store = as, as
		mcfg.Notifier, _ = cfg.Store.(memory.Notifier)
		fcfg.Notifier = mcfg.Notifier
	}
	if _, calls := cfg.Store.(memory.CallLog); !calls {
		// Nothing resumes a suspended run: the calls wait until the
		// timeout.
		mcfg.SuspendAfter, fcfg.SuspendAfter = 0, 0
	}
	m, err := person.StartApprovals(mcfg)
	if err != nil {
		return people{}, fmt.Errorf("runner: %w", err)
	}
	f, err := person.StartForms(fcfg)
	if err != nil {
		m.Close()
		return people{}, fmt.Errorf("runner: %w", err)
	}
	return people{approvals: m, forms: f}, nil
}

func (p people) close() {
	p.approvals.Close()
	p.forms.Close()
}

// Ask is one thing a session waits for a person to do, as [Runner.Pending]
// lists it: an approval to decide, or a form to answer. Exactly one of its
// fields is set.
type Ask struct {
	// Approval is a call that waits for a decision ([Runner.Decide]).
	Approval *approval.PendingApproval `json:"approval,omitempty"`
	// Form is a form that waits for its answers ([Runner.Answer]): an
	// ask_user_question form, or an MCP server's request for input.
	Form *interact.PendingForm `json:"form,omitempty"`
}

// created returns when a was asked.
func (a Ask) created() time.Time {
	if a.Approval != nil {
		return a.Approval.Created
	}
	return a.Form.Created
}

// Pending lists what the session waits for a person to do, oldest first:
// its pending approvals and its open forms, in every process that shares
// the Store (also those of a suspended turn), so that a front end that
// reconnects draws them again. An approval or form past its timeout is
// recorded as timed out instead of listed.
func (r *Runner) Pending(ctx context.Context, sessionID string) ([]Ask, error) {
	approvals, err := r.approvals.Pending(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	forms, err := r.forms.Pending(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	out := make([]Ask, 0, len(approvals)+len(forms))
	for i := range approvals {
		out = append(out, Ask{Approval: &approvals[i]})
	}
	for i := range forms {
		out = append(out, Ask{Form: &forms[i]})
	}
	slices.SortStableFunc(out, func(a, b Ask) int { return a.created().Compare(b.created()) })
	return out, nil
}

// Reply is a person's decision on one approval, bound to what that person
// saw: the approval's session, call id, tool and the digest of its
// arguments, as on the approval_required chunk (agent.ToolCall.ID, Name,
// ApprovalID and ArgumentsDigest). A reply whose binding differs from the
// approval's is refused.
type Reply struct {
	SessionID  string
	ApprovalID string
	// CallID, Tool and ArgumentsDigest name the call the person saw; all
	// three are required.
	CallID, Tool, ArgumentsDigest string
	// Decision is the decision. Its By is who decided (the principal the
	// host's authentication knows), and Via through what (approval.ViaHTTP,
	// approval.ViaTerminal or a host's own); both go to the audit. Via
	// defaults to approval.ViaHTTP, By to "unknown".
	Decision agent.Decision
}

// Decide gives rep.Decision to the pending approval rep.ApprovalID of
// session rep.SessionID, in the Store: the run that waits for it, in any
// process, takes it; a suspended turn is resumed on it. It reports whether
// the approval was pending: false means the id is unknown, or the approval
// was already decided, timed out or cancelled (a stale card); the first
// decision wins, across every process that shares the Store.
//
// Decide fails, and leaves the approval pending, with an error wrapping
// approval.ErrWrongSession when the id belongs to another session,
// approval.ErrMismatch when rep's call id, tool or arguments digest is not
// the approval's (a decision is taken only for what the person saw),
// approval.ErrInvalidArguments when edited arguments are not a JSON
// object, approval.ErrInvalidScope for an unknown scope, and when the
// Store fails.
func (r *Runner) Decide(ctx context.Context, rep Reply) (pending bool, err error) {
	return r.approvals.Respond(ctx, person.Reply{SessionID: rep.SessionID, ApprovalID: rep.ApprovalID,
		CallID: rep.CallID, Tool: rep.Tool, ArgumentsDigest: rep.ArgumentsDigest, Decision: rep.Decision})
}

// FormReply is a person's answer to one form, as [Runner.Answer] takes it.
type FormReply struct {
	SessionID string
	FormID    string
	// Answers answer a form_request (ask_user_question), by question id.
	Answers interact.Answers
	// Elicitation answers an elicitation_request (an MCP server's request
	// for input) instead of Answers.
	Elicitation *interact.ElicitationAnswer
	// Cancel dismisses the form instead of answering it (the person moved
	// on): its call ends with an error the model reads (an elicitation is
	// answered cancel).
	Cancel bool
	// By is who answered (the principal the host's authentication knows)
	// and Via through what ("http", "terminal"); kept with the answer.
	By, Via string
}

// Answer gives rep's answers to the open form rep.FormID of session
// rep.SessionID, in the Store: the call that waits for them, in any
// process, takes them; a suspended turn is resumed on them. It reports
// whether the form was open: false means the id is unknown, or the form
// was already answered, timed out or cancelled (a stale form).
//
// Answer fails, and leaves the form open, with an error wrapping
// interact.ErrWrongSession when the form belongs to another session,
// interact.ErrInvalidAnswers when the answers do not fit the form's
// questions (or an elicitation's schema), and when the Store fails.
func (r *Runner) Answer(ctx context.Context, rep FormReply) (open bool, err error) {
	return r.forms.Answer(ctx, interact.FormReply{SessionID: rep.SessionID, FormID: rep.FormID, Answers: rep.Answers,
		Elicitation: rep.Elicitation, Cancel: rep.Cancel, By: rep.By, Via: rep.Via})
}

// Stopped says what [Runner.Stop] stopped.
type Stopped struct {
	// Run is true when a run of the session was interrupted (see
	// [Runner.Interrupt]).
	Run bool
	// Approvals and Forms are how many pending approvals and open forms
	// of the session were cancelled.
	Approvals, Forms int
}

// Any reports whether Stop found something to stop.
func (s Stopped) Any() bool { return s.Run || s.Approvals > 0 || s.Forms > 0 }

// Stop stops a session, as a person's stop button does, from any process
// that shares the Store: it interrupts the session's run wherever it is
// driven ([Runner.Interrupt]), then cancels the session's pending
// approvals and open forms in the Store (a turn suspended at them has no
// run to interrupt: the cancellations end it when it is resumed; a call
// that waits for one ends at once, as interrupted). It returns once the
// interrupted run has ended (see Interrupt), with what it stopped; the
// errors of each part are joined, and the other parts are done all the
// same.
func (r *Runner) Stop(ctx context.Context, sessionID string) (Stopped, error) {
	var s Stopped
	var errs [3]error
	s.Run, errs[0] = r.Interrupt(ctx, sessionID)
	// After the run's end: a call that waited ends as interrupted, not
	// as cancelled.
	s.Approvals, errs[1] = r.approvals.CancelSession(ctx, sessionID)
	s.Forms, errs[2] = r.forms.CancelSession(ctx, sessionID)
	if err := errors.Join(errs[:]...); err != nil {
		return s, fmt.Errorf("runner: stopping session %q: %w", sessionID, err)
	}
	return s, nil
}

// Decisions returns the audit trail: the decisions on the approvals q
// selects, oldest first, read from the Store page by page as the loop goes
// (see approval.DecisionRecord): people's (with who decided and
// through what), the policies' (Config.Policies, "policy:<name>"),
// timeouts and interruptions. A Store that fails ends the sequence with
// its error.
func (r *Runner) Decisions(ctx context.Context, q approval.DecisionQuery) iter.Seq2[approval.DecisionRecord, error] {
	return r.approvals.Decisions(ctx, q)
}

// asker is the interact.Asker of the runs: the Runner's forms.
func (r *Runner) asker() interact.Asker { return r.forms }
