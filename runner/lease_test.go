package runner_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/agenttest"
	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/runner"
)

// TestLeaseRenewalWhileStreaming: a turn streams (the model holds its
// reply after the first delta) while its lease is renewed. Renewals the
// store fails are tried again as long as the lease lasts: the turn
// finishes. A store that fails them until the lease would expire stops the
// turn, and so does a lease another process holds; the end's reason says
// which happened.
func TestLeaseRenewalWhileStreaming(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int  // renewals that fail (-1: all, until the turn ends)
		other    bool // another process takes the lease instead
		want     runner.TurnEnded
	}{
		{"two renewals fail", 2, false, runner.TurnEnded{Status: runner.StatusFinished}},
		{"renewals fail until the lease expires", -1, false, runner.TurnEnded{Status: runner.StatusInterrupted, Reason: runner.ReasonLeaseUnrenewed}},
		{"another process holds the lease", 0, true, runner.TurnEnded{Status: runner.StatusInterrupted, Reason: runner.ReasonSessionLost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			ctx := testContext(t, 20*time.Second)
			st := &flakyStore{MemStore: &memory.MemStore{}}
			srv := model(t)
			reached, release := make(chan struct{}), make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the server closes
			srv.Enqueue(agenttest.Reply().Text("Hello", " there", "! <no_tool>").Finish("stop").OnFlush(func(frame int) {
				if frame == 1 {
					close(reached)
					<-release
				}
			}))
			var runs atomic.Int32
			p := newReplica(t, st, srv, &runs, options{holder: "A", ttl: time.Second})
			turn, err := p.r.Start(ctx, agent.Input{SessionID: "s1", Message: "hello"})
			require.NoError(t, err)
			wait := func(what string, c <-chan struct{}) {
				t.Helper()
				select {
				case <-c:
				case <-ctx.Done():
					t.Fatalf("waiting for %s: %v", what, ctx.Err())
				}
			}
			wait("the first delta", reached)
			switch {
			case tc.other:
				require.NoError(t, st.ReleaseLease(ctx, "s1", "A"))
				ok, err := st.AcquireLease(ctx, "s1", "B", time.Hour)
				require.NoError(t, err)
				require.True(t, ok)
				wait("the turn's end", turn.Done())
			case tc.failures > 0:
				_, renewed := st.failLeases(tc.failures)
				select {
				case <-renewed: // after the failures
				case <-turn.Done():
					t.Fatalf("the turn ended while its lease was being renewed: %+v", turn.Ended())
				case <-ctx.Done():
					t.Fatalf("waiting for the lease to be renewed: %v", ctx.Err())
				}
			default:
				failed, _ := st.failLeases(-1)
				wait("a failed renewal", failed)
				wait("the turn's end", turn.Done())
				st.failLeases(0)
			}
			select { // the model goes on (the turn may have stopped listening)
			case release <- struct{}{}:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			wait("the turn's end", turn.Done())
			assert.Equal(t, tc.want, turn.Ended())
		})
	}
}
