package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/planround/planround/runner"
)

// replica is this process: its runner drives the runs (turns asked over
// ui/jsonapi, and the resumes the runner starts on a decision or a sweep),
// whose events any replica serves from the store's event log.
type replica struct {
	opts   options
	store  store
	log    *slog.Logger
	sweeps atomic.Int64 // sweeps done

	// runner is set once by run, before the server serves.
	runner *runner.Runner
}

func newReplica(o options, st store, log *slog.Logger) *replica {
	return &replica{opts: o, store: st, log: log}
}

// sweep calls the runner's Sweep every opts.sweep until ctx ends, the
// first time at once (a restarted replica resumes what it left).
func (r *replica) sweep(ctx context.Context) {
	if r.opts.sweep <= 0 {
		return
	}
	t := time.NewTicker(r.opts.sweep)
	defer t.Stop()
	for {
		if err := r.runner.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("sweep failed", "err", err)
		}
		r.sweeps.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
