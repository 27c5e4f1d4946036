package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSubscriberQueue: a stream's queue holds up to subscriberBuffer
// events in order and refuses more (the stream is then dropped), wakes its
// writer once per batch, and after a burst the writer keeps neither the
// events nor a large slice.
func TestSubscriberQueue(t *testing.T) {
	sub := newSubscriber()
	evs := make([]event, subscriberBuffer+1)
	for i := range subscriberBuffer {
		evs[i].seq = int64(i + 1)
		require.True(t, sub.push(&evs[i]), "event %d", i+1)
	}
	assert.False(t, sub.push(&evs[subscriberBuffer]), "one more than subscriberBuffer")
	assert.Len(t, sub.ready, 1, "one wake-up for the batch")
	<-sub.ready

	var spare []*event
	q := sub.take(spare)
	require.Len(t, q, subscriberBuffer)
	for i, ev := range q {
		assert.Equal(t, int64(i+1), ev.seq)
	}
	assert.Nil(t, reuse(q), "a burst's slice is not kept")
	assert.Empty(t, sub.take(nil), "the queue is empty after a take")

	require.True(t, sub.push(&evs[0]))
	small := sub.take(nil)
	require.Len(t, small, 1)
	small = reuse(small)
	assert.Empty(t, small)
	assert.Nil(t, small[:1][0], "the written event is let go")
	require.True(t, sub.push(&evs[1]))
	q = sub.take(small)
	assert.Equal(t, []*event{&evs[1]}, q)
}
