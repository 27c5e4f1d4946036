package durable

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/planround/planround/agent"
)

// Run with enough decisions for a p99, and without -race:
//
//	go test -run '^$' -bench 'Decision' -benchtime 200x ./test/durable/
//
// Each benchmark starts its replicas on a fresh PostgreSQL schema (it skips
// without a server), BenchmarkDecisionWakesOtherReplica on a fresh SQLite
// file too, and reports the latency of a decision: p50-ms and
// p99-ms, from the moment the test sends the POST to the moment it reads
// the executing chunk of the call the decision approved. ns/op is the time
// of a whole turn and its set-up, not a figure to compare.

// BenchmarkDecisionWakesOtherReplica: the run waits on replica A, the
// decision is posted to replica B; measured until A's turn stream shows the
// call executing (B takes the decision in the store and notifies, A's
// Manager wakes the Wait, the agent records the call as executing). On
// SQLite the note waits in the file for A's next look at it (four a
// second).
func BenchmarkDecisionWakesOtherReplica(b *testing.B) {
	for _, db := range backends {
		b.Run(db.name, func(b *testing.B) { decisionWakesOtherReplica(b, db.new(b)) })
	}
}

func decisionWakesOtherReplica(b *testing.B, db backend) {
	a, rb, _ := twoReplicasOn(b, db)
	ctx := testContext(b, 30*time.Minute)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		session, key := fmt.Sprintf("s%d", i), fmt.Sprintf("k%d", i)
		turn := a.turn(ctx, b, session, key)
		call := turn.waitFor(ctx, b, "approval_required", isState(agent.StateApprovalRequired)).tool()
		start := time.Now()
		rb.mustApprove(ctx, b, decisionFor(session, call, true))
		turn.waitFor(ctx, b, "executing", isState(agent.StateExecuting))
		lat = append(lat, time.Since(start))
		turn.waitFor(ctx, b, "the end of the turn", isEnd("turn"))
		turn.close()
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkDecisionResumesAfterKill: b.N runs wait on replica A, which is
// killed; once its leases expired, each decision is posted to replica B,
// which resumes the run; measured until B shows the call executing. The
// lease expiry is not in the figure: every decision comes after it.
func BenchmarkDecisionResumesAfterKill(b *testing.B) {
	const ttl = 3 * time.Second
	a, rb, _ := twoReplicas(b, "-lease-ttl", ttl.String())
	ctx := testContext(b, 30*time.Minute)
	calls := make([]*agent.ToolCall, b.N)
	for i := range b.N {
		turn := a.turn(ctx, b, fmt.Sprintf("s%d", i), fmt.Sprintf("k%d", i))
		calls[i] = turn.waitFor(ctx, b, "approval_required", isState(agent.StateApprovalRequired)).tool()
	}
	a.kill()
	time.Sleep(ttl + 500*time.Millisecond) // every lease of A expires
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i, call := range calls {
		session := fmt.Sprintf("s%d", i)
		b.StopTimer()
		events := rb.events(ctx, b, session)
		b.StartTimer()
		start := time.Now()
		rb.mustApprove(ctx, b, decisionFor(session, call, true))
		events.waitFor(ctx, b, "executing on B", resumed(isState(agent.StateExecuting)))
		lat = append(lat, time.Since(start))
		events.close()
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// reportLatency reports the median and the 99th percentile of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(lat))+0.999999) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(pct(0.50)), "p50-ms")
	b.ReportMetric(ms(pct(0.99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}
