package tracefile

import (
	"testing"

	"github.com/planround/planround/internal/examplestest"
)

// TestExamples runs the tests of examples/tracefile, in the examples' module
// (see internal/examplestest).
func TestExamples(t *testing.T) { examplestest.Run(t, "./tracefile/...") }
