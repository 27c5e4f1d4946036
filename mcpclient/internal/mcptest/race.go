//go:build race

package mcptest

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
