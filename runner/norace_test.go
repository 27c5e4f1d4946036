//go:build !race

package runner_test

// raceEnabled reports whether the tests run with the race detector.
const raceEnabled = false
