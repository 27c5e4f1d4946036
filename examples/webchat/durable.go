package main

// Durable turns. With a Store that keeps open calls and approvals (see
// Options.Store), a turn that waits for a decision is not tied to the
// process that started it: the runner (package runner) keeps its approvals
// and forms in the Store, resumes a turn when a decision comes that no run
// of this process waits for, when its sweeper finds a turn that can go on
// (a decision taken while no process ran it, a call cut by a crash), and
// suspends the runs that wait for a decision at Close instead of
// interrupting them, so that their cards stay answerable. Every run holds
// its session's lease (memory.Leaser): one process at a time drives a
// session.
//
// With a *pgstore.Store the Server is one replica of many behind a load
// balancer, with no stickiness: a browser's requests may reach any of
// them. They share, through PostgreSQL, the conversations, the open calls,
// the approvals, the leases and the turns' events (the Store's event log,
// whose notes wake the event streams of the other replicas); a stop
// posted to one replica reaches the run on another (runner.Runner.Stop).
// Nothing else needs sharing: an owner cookie is checked against the
// session id it made (a hash, access.go), which every replica computes the
// same way; an access token (-token) must be given to every replica.
// ask_user_question forms, and the MCP servers' requests for input, are
// kept in the Store like the approvals: a form is answered on any replica,
// outlives a restart, and its answer resumes a suspended turn.
