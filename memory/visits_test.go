package memory

// ReplayVisits returns the messages the replays of summaries have looked
// at so far in this process (see replayVisits), for the tests of package
// memory_test.
func ReplayVisits() int64 { return replayVisits.Load() }
