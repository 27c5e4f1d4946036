package memory

import (
	"sort"
	"sync/atomic"
)

// nextActive finds the first message at or after an index that is still
// active, among the messages of a session or a document, without looking
// at the archived ones one by one: a pointer skips them, and each lookup
// makes the pointers it followed jump to its answer (a union-find with path
// compression). A replay of n summaries over n messages so costs n log n at
// most, whatever their ranges, instead of n² for a scan of each range.
//
// next[i] == i when message i is active; the last entry, next[n] == n,
// stands for the end. The zero value holds no message.
type nextActive struct {
	next []int
	hops int64 // pointers followed by from, in all
}

// replayVisits counts the messages that the replays of summaries looked at
// (check and MemStore.Summarize): the archived ones and those skipped. A
// test holds it in proportion to the messages.
var replayVisits atomic.Int64

// newNextActive returns a nextActive of n active messages.
func newNextActive(n int) *nextActive {
	a := new(nextActive)
	a.grow(n)
	return a
}

// grow adds active messages up to n in all.
func (a *nextActive) grow(n int) {
	for j := len(a.next); j <= n; j++ {
		a.next = append(a.next, j)
	}
}

// from returns the first active index at or after i, or the number of
// messages when there is none (i itself when beyond).
func (a *nextActive) from(i int) int {
	if i >= len(a.next) {
		return i
	}
	root := i
	for a.next[root] != root {
		root = a.next[root]
		a.hops++
	}
	for a.next[i] != root {
		a.next[i], i = root, a.next[i]
	}
	return root
}

// remove marks the active message i archived.
func (a *nextActive) remove(i int) { a.next[i] = i + 1 }

// idRange returns the indexes [lo, hi) of the messages of msgs, whose ids
// increase, with ids in [first, last].
func idRange(msgs []Message, first, last int64) (lo, hi int) {
	lo = sort.Search(len(msgs), func(i int) bool { return msgs[i].ID >= first })
	hi = sort.Search(len(msgs), func(i int) bool { return msgs[i].ID > last })
	return lo, max(lo, hi)
}
