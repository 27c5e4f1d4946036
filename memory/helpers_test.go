package memory_test

import (
	"context"
	"errors"

	"github.com/planround/planround/memory"
)

// summarizeFails is a MemStore whose Summarize always fails.
type summarizeFails struct{ memory.MemStore }

func (*summarizeFails) Summarize(context.Context, string, memory.Summary) (memory.Summary, error) {
	return memory.Summary{}, errors.New("disk full")
}
