// Package durable tests durable runs end to end with real processes: each
// replica is the program in ./replica (an agent on a shared SQLite file or
// PostgreSQL schema, driven by a runner with durable approvals, a sweeper
// that resumes stopped runs and a scripted model of its own), started,
// killed with SIGKILL and restarted by the tests, which drive it as a front
// end does, through the ui/jsonapi protocol it serves (send, events from a
// cursor, history, decide, answer, stop), and then check that every
// decision is taken once, every side effect runs at most once and every
// history stays valid. Its benchmarks measure how fast a decision posted to
// one replica reaches the run it wakes on another.
//
// The package has no API: everything is in its tests and the replica.
package durable
