// Package runner drives conversations: the one place where a host's
// sessions are run, across crashes, restarts and replicas, with the
// guarantees a durable service needs on by default.
//
// A [Runner] is built on one store ([Config.Store], the only place a host
// names it) and an agent configuration ([Config.Agent]); it builds the
// agent on that store, and owns the person in the loop: the approvals and
// forms of its runs are kept in the store, listed by [Runner.Pending],
// decided by [Runner.Decide] (bound to the call the person saw) and
// answered by [Runner.Answer], and [Runner.Decisions] reads the audit;
// [Runner.Stop] stops a session from any process. A durable host is:
//
//	st, _ := sqlitestore.Open(ctx, "chat.db")
//	r, _ := runner.New(runner.Config{
//		Store:    st,
//		Agent:    agent.Config{Model: "gpt-4o-mini", Tools: tools},
//		Policies: []approval.Policy{approval.ReadOnlyHints()}, // decided without a person
//	})
//	defer r.Close()
//
// What the Store implements decides what the Runner can promise; the
// SQLite store (memory/sqlitestore, the processes of one machine on one
// file) and the PostgreSQL store (memory/pgstore, any number of processes)
// implement all of it, memory.MemStore within one process:
//
//   - one driver per session: a run holds the session's lease
//     (memory.Leaser) while it drives it, and the agent asks the Runner
//     before each tool starts whether it still does, so a tool call runs at
//     most once even when a slow process loses its session to another;
//   - turns that wait for a person survive the process (memory.CallLog,
//     memory.ApprovalStore): Close suspends them, and a decision or an
//     answer — taken in any process ([Runner.Decide], [Runner.Answer]),
//     announced on the Store's memory.Notifier — resumes them where a
//     process hears it; a sweeper resumes what a lost note or a dead
//     process left;
//   - every turn's events are numbered per session ([Event]), kept in the
//     Store's event log (memory.EventLog) and followed from a cursor
//     ([Runner.Subscribe]) in any process, so a client that reconnects or
//     lands on another replica misses nothing; a turn whose process died is
//     ended by the next process that looks at it; events the Store fails
//     to take are tried again in order, and one that cannot be encoded is
//     logged as a warning (WarnNotLogged), so the log has no gap;
//   - an interrupt reaches the run wherever it is driven ([Runner.Interrupt]),
//     and a stop ([Runner.Stop]) also cancels the session's approvals and
//     forms in the Store.
//
// # Driving a session
//
// [Runner.Start] starts a turn in the background and returns once the
// user's message is stored; the run does not depend on the request that
// started it, and its events go to the subscribers. [Runner.Send] is Start
// followed by the turn's events, for a caller that follows one turn.
// [Runner.Resume] continues a stopped turn (the Runner does so by itself
// when it can). A message to a session that a run drives, in this process or
// another, is refused with an error wrapping agent.ErrBusy. One that comes
// while no turn is in progress waits for what holds the session (the end of
// a turn being cleared, a sweep or a resume that looks at it) instead: a
// client that sends its next message as soon as it sees a turn's end is
// not refused. Nor is one that sends as soon as its stop was acknowledged:
// [Runner.Interrupt] returns once the interrupted run has ended.
//
// # The person in the loop
//
// The tools that ask the person (interact.AskUserQuestion, an MCP server's
// request for input through mcpclient) find the Runner's forms in the
// context of every run it drives (interact.WithAsker): a host wires
// nothing. A call needs approval unless a policy of Config.Policies
// decides it; the approval_required chunk carries what a decision must
// name (agent.ToolCall.ID, Name, ApprovalID and ArgumentsDigest), and
// [Runner.Decide] refuses a decision for another call. [Runner.Pending]
// lists what a session waits for, so that a front end that reconnects, on
// any process, draws it again.
//
// # Events
//
// A session's events are EventTurnStarted, then the turn's chunks
// (EventChunk, the agent's chunks unchanged), then EventTurnEnded with a
// [Status]: finished, interrupted, rejected, suspended or error. Each has a
// Seq, from 1 without a gap per session, and the Turn it belongs to. A
// client keeps the Seq of the last event it has and subscribes after it; a
// client that shows the stored history first asks [Runner.Log] where the
// log is, and subscribes after that. An Event marshals to a stable JSON
// form a host forwards unchanged.
//
// # Shutdown
//
// [Runner.Close] stops starting runs, suspends those that wait for a person
// (their approvals stay answerable in the Store; see
// Config.InterruptOnClose for a Store that does not outlive the process),
// interrupts the others, waits for them, writes their last events and
// releases their leases.
package runner
