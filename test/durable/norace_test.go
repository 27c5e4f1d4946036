//go:build !race

package durable

// raceEnabled reports whether the tests run with the race detector: the
// replicas are then built with it too.
const raceEnabled = false
