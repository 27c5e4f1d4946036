package memory_test

import (
	"context"
	"errors"
	"runtime"

	"github.com/planround/planround/memory"
)

// summarizeFails is a MemStore whose Summarize always fails.
type summarizeFails struct{ memory.MemStore }

func (*summarizeFails) Summarize(context.Context, string, memory.Summary) (memory.Summary, error) {
	return memory.Summary{}, errors.New("disk full")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
