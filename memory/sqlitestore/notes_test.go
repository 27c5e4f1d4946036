package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/memory/storetest"
)

// TestNotifierTwoStoresOneFile: two Stores on one file, as two processes
// would open it, hear each other's notes, in order, on their channels.
func TestNotifierTwoStoresOneFile(t *testing.T) {
	leaktest.Check(t)
	storetest.RunNotifierPair(t, func(t *testing.T) (a, b memory.Notifier) {
		path := filepath.Join(t.TempDir(), "db")
		return openSQLite(t, path), openSQLite(t, path)
	})
}

// notesIn returns how many notes the file at path holds, and how many
// Stores listen to them.
func notesIn(t *testing.T, path string) (notes, listeners int) {
	t.Helper()
	db := rawDB(t, path)
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM notes").Scan(&notes))
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM note_listeners").Scan(&listeners))
	return notes, listeners
}

// heardBy returns a channel that gets the payloads a listener on channel
// "c" of st hears; the listener stops when t ends.
func heardBy(t *testing.T, st *sqlitestore.Store) <-chan string {
	t.Helper()
	heard := make(chan string, 100)
	stop, err := st.Listen(t.Context(), "c", func(p string) { heard <- p })
	require.NoError(t, err)
	t.Cleanup(stop)
	return heard
}

func next(t *testing.T, heard <-chan string) string {
	t.Helper()
	select {
	case p := <-heard:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no note within 10s")
		return ""
	}
}

// TestNotesOnlyForListeners: a Store alone on its file writes no note to
// it, listening or not; once another Store on the file listens, notes are
// written for it (and the sender's own listeners hear them once); when its
// last listener stops, it no longer listens, and the notes stop.
func TestNotesOnlyForListeners(t *testing.T) {
	leaktest.Check(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	a := openSQLite(t, path)
	own := heardBy(t, a)
	require.NoError(t, a.Notify(ctx, "c", "alone"))
	assert.Equal(t, "alone", next(t, own))
	notes, listeners := notesIn(t, path)
	assert.Zero(t, notes, "notes written with nobody else listening")
	assert.Equal(t, 1, listeners, "a listening Store has its row")

	b := openSQLite(t, path)
	stop, err := b.Listen(ctx, "c", func(string) {})
	require.NoError(t, err)
	require.NoError(t, a.Notify(ctx, "c", "for b"))
	assert.Equal(t, "for b", next(t, own))
	notes, listeners = notesIn(t, path)
	assert.Equal(t, 1, notes, "a note for the other Store")
	assert.Equal(t, 2, listeners)

	stop()
	_, listeners = notesIn(t, path)
	assert.Equal(t, 1, listeners, "b's row after its last listener stopped")
	require.NoError(t, a.Notify(ctx, "c", "alone again"))
	assert.Equal(t, "alone again", next(t, own))
	notes, _ = notesIn(t, path)
	assert.Equal(t, 1, notes, "notes written after b stopped listening")
	select {
	case p := <-own:
		t.Errorf("a's listener heard %q twice", p)
	default:
	}
}

// TestNotesLost: a listener whose Store missed notes, pruned from the file
// before its poller read them, is told so with an empty payload before the
// notes that follow.
func TestNotesLost(t *testing.T) {
	leaktest.Check(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	a, b := openSQLite(t, path), openSQLite(t, path)
	heard := heardBy(t, b)
	require.NoError(t, a.Notify(ctx, "c", "first"))
	assert.Equal(t, "first", next(t, heard))
	// As if a had sent many notes, pruned since: the next one b reads is
	// not the one after the last it read.
	_, err := rawDB(t, path).Exec(`UPDATE sqlite_sequence SET seq = seq + 10000 WHERE name = 'notes'`)
	require.NoError(t, err)
	require.NoError(t, a.Notify(ctx, "c", "after a gap"))
	assert.Equal(t, "", next(t, heard), "notes may have been lost")
	assert.Equal(t, "after a gap", next(t, heard))
}

// TestNotesCloseUnlistens: Close takes the Store out of the listeners and
// ends its poller.
func TestNotesCloseUnlistens(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "db")
	st, err := sqlitestore.Open(t.Context(), path)
	require.NoError(t, err)
	_ = heardBy(t, st)
	_, listeners := notesIn(t, path)
	require.Equal(t, 1, listeners)
	require.NoError(t, st.Close())
	_, listeners = notesIn(t, path)
	assert.Zero(t, listeners)
}
