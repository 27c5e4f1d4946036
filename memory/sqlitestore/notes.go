package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/planround/planround/memory"
)

// Notes between the processes on one file.
//
// SQLite has no notifications, so notes travel through the file. Notify
// hands a note to the Store's own listeners at once and, when another
// Store on the file listens (it has a row in note_listeners), writes it to
// the table notes. A Store with listeners runs one poller: every
// pollInterval it reads PRAGMA data_version on a connection of its own,
// a number that changes when another connection commits, and only when it
// changed does it read the notes written since the last one it read. So a
// note reaches another process within about pollInterval; a Store without
// listeners polls nothing, and a Notify that nobody else listens for costs
// one indexed read.

const (
	// pollInterval is how often a Store with listeners looks at
	// PRAGMA data_version.
	pollInterval = 250 * time.Millisecond
	// keepNotes is how many notes the table keeps: a poller that falls
	// further behind tells its listeners that notes may have been lost.
	keepNotes = 4096
	// listenerTTL is how long a Store's row in note_listeners lasts
	// unless its poller renews it, every renewListener.
	listenerTTL   = 10 * time.Minute
	renewListener = time.Minute
	// unlistenWait bounds the write that takes a Store's row out of
	// note_listeners when its last listener stops.
	unlistenWait = 2 * time.Second
)

// newStoreID returns an unguessable id for a Store: 64 random bits in hex.
func newStoreID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// Notify implements [memory.Notifier.Notify]: the note reaches the
// listeners of this Store at once, and those of the other Stores on the
// file, in this process and the others, within about a quarter of a
// second (see [Store]). A note for the other Stores is a row of the file,
// written only when one of them listens. When that write fails, the
// listeners of this Store have heard the note and Notify returns the
// error.
func (st *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: notify %q: %w", channel, err)
	}
	if err := memory.ValidateNote(channel, payload); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	if err := st.notes.Deliver(channel, payload); err != nil {
		return fmt.Errorf("sqlitestore: notify %q: store %w", channel, err)
	}
	var others bool
	err := st.r.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM note_listeners WHERE store <> ? AND expires_at > ?)",
		st.id, time.Now().UnixNano()).Scan(&others)
	if err == nil && others {
		err = st.write(ctx, func(tx *sql.Tx) error {
			var seq int64
			err := tx.QueryRowContext(ctx, "INSERT INTO notes (channel, payload, sender, created_at) VALUES (?, ?, ?, ?) RETURNING seq",
				channel, []byte(payload), st.id, time.Now().UnixNano()).Scan(&seq)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "DELETE FROM notes WHERE seq <= ?", seq-keepNotes)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: notify %q: %w", channel, err)
	}
	return nil
}

// Listen implements [memory.Notifier.Listen]: fn hears the notes sent
// through this Store and, once Listen has returned, those sent through the
// other Stores on the file, in this process and the others (see [Store]).
// Each Listen has its own goroutine, and a Store with listeners one more,
// which polls the file; they end when stop is called or the Store is
// closed. stop must not be called from fn.
func (st *Store) Listen(ctx context.Context, channel string, fn func(payload string)) (stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: listen to %q: %w", channel, err)
	}
	if channel == "" || fn == nil {
		return nil, fmt.Errorf("sqlitestore: listen to %q: want a channel name and a function", channel)
	}
	stopHub, err := st.notes.Add(channel, fn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: listen to %q: store %w", channel, err)
	}
	if err := st.listening(ctx); err != nil {
		stopHub()
		return nil, fmt.Errorf("sqlitestore: listen to %q: %w", channel, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopHub()
			st.unlistening()
		})
	}, nil
}

// errStoreClosed is the error of a Listen after Close.
var errStoreClosed = errors.New("store closed")

// listeners counts a Store's Listens and runs its poller while it has
// any.
type listeners struct {
	mu     sync.Mutex
	n      int      // Listens not stopped; guarded by mu
	run    *pollRun // the running poller, nil when none; guarded by mu
	closed bool     // Close was called; guarded by mu
}

// pollRun is one run of a Store's poller.
type pollRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the poller has ended
}

// listening counts one more Listen and starts the poller when none runs:
// the Store's row in note_listeners is written and the poller knows the
// last note on the file before it returns, so every note written after it
// is heard.
func (st *Store) listening(ctx context.Context) error {
	l := &st.lis
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errStoreClosed
	}
	if l.run == nil {
		run, err := st.startPoll(ctx)
		if err != nil {
			return err
		}
		l.run = run
	}
	l.n++
	return nil
}

// unlistening counts one Listen less and stops the poller after the last
// one: the Store's row leaves note_listeners, so that the other Stores no
// longer write their notes for it.
func (st *Store) unlistening() {
	l := &st.lis
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return // stopped by Close
	}
	l.n--
	if l.n == 0 && l.run != nil {
		st.stopPoll(l.run)
		l.run = nil
	}
}

// closeListeners stops the poller for Close.
func (st *Store) closeListeners() {
	l := &st.lis
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed, l.n = true, 0
	if l.run != nil {
		st.stopPoll(l.run)
		l.run = nil
	}
}

// stopPoll ends run, waits for it, and takes the Store's row out of
// note_listeners. st.lis.mu is held.
func (st *Store) stopPoll(run *pollRun) {
	run.cancel()
	<-run.done
	ctx, cancel := context.WithTimeout(context.Background(), unlistenWait)
	defer cancel()
	// A row left behind expires: the others write notes nobody reads until then.
	_ = st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM note_listeners WHERE store = ?", st.id)
		return err
	})
}

// register writes or renews the Store's row in note_listeners, and
// removes the rows that expired. It returns when the row expires, in Unix
// nanoseconds by this machine's clock, by which the others judge it.
func (st *Store) register(ctx context.Context) (expires int64, err error) {
	now := time.Now().UnixNano()
	expires = now + listenerTTL.Nanoseconds()
	return expires, st.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO note_listeners (store, expires_at) VALUES (?, ?)
			ON CONFLICT (store) DO UPDATE SET expires_at = excluded.expires_at`, st.id, expires)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM note_listeners WHERE expires_at <= ?", now)
		return err
	})
}

// poller is the state of one run of the poller, owned by its goroutine.
type poller struct {
	st      *Store
	conn    *sql.Conn // of st.p: PRAGMA data_version counts per connection
	version int64     // PRAGMA data_version when the notes were last read
	last    int64     // the seq of the last note read
	// expires is when the Store's row, as last written, expires, and
	// renew when to write it again: Unix nanoseconds by the wall clock,
	// which the others judge the row by (a monotonic clock stops while the
	// machine sleeps).
	expires, renew int64
}

// startPoll registers the Store as a listener, reads where the notes are,
// and starts the poller.
func (st *Store) startPoll(ctx context.Context) (*pollRun, error) {
	conn, err := st.p.Conn(ctx)
	if err != nil {
		return nil, err
	}
	p := &poller{st: st, conn: conn}
	if p.expires, err = st.register(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	p.renew = time.Now().UnixNano() + renewListener.Nanoseconds()
	// data_version first: a note committed after it was read makes it
	// change, and is read at the next poll.
	err = conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&p.version)
	if err == nil {
		err = conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM notes").Scan(&p.last)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	run := &pollRun{cancel: cancel, done: make(chan struct{})}
	go p.loop(pctx, run.done)
	return run, nil
}

// loop polls until ctx ends.
func (p *poller) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	defer p.conn.Close()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.poll(ctx)
	}
}

// poll is one look at the file: it renews the Store's row when due, and
// reads the notes when another connection committed since the last read.
func (p *poller) poll(ctx context.Context) {
	if now := time.Now().UnixNano(); now >= p.renew {
		if expires, err := p.st.register(ctx); err == nil {
			if now >= p.expires {
				// The row expired before it was renewed (the process was
				// stopped, or the machine slept): the others may have
				// skipped notes meanwhile.
				p.st.notes.DeliverAll("")
			}
			p.expires, p.renew = expires, now+renewListener.Nanoseconds()
		}
	}
	var version int64
	if err := p.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&version); err != nil || version == p.version {
		return // nothing committed, or the next tick tries again
	}
	if err := p.read(ctx); err == nil {
		p.version = version // else the next tick reads again
	}
}

// read hands the notes written since the last one read to the listeners,
// except the Store's own, which Notify delivered. A note missing between
// them (a poller that fell more than keepNotes behind) makes it tell every
// listener that notes may have been lost first.
func (p *poller) read(ctx context.Context) error {
	rows, err := p.conn.QueryContext(ctx, "SELECT seq, channel, payload, sender FROM notes WHERE seq > ? ORDER BY seq", p.last)
	if err != nil {
		return err
	}
	defer rows.Close()
	type note struct {
		seq             int64
		channel, sender string
		payload         []byte
	}
	var notes []note
	for rows.Next() {
		var n note
		if err := rows.Scan(&n.seq, &n.channel, &n.payload, &n.sender); err != nil {
			return err
		}
		notes = append(notes, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, n := range notes {
		if i == 0 && n.seq != p.last+1 {
			p.st.notes.DeliverAll("") // pruned before this poller read them
		}
		p.last = n.seq
		if n.sender != p.st.id {
			p.st.notes.Deliver(n.channel, string(n.payload))
		}
	}
	return nil
}
