package memory_test

import (
	"testing"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/storetest"
)

func TestMemStoreDurable(t *testing.T) {
	leaktest.Check(t)
	storetest.RunDurable(t, func(t *testing.T) memory.Store { return new(memory.MemStore) })
}
