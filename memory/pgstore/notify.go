package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/internal/notehub"
)

// Notify implements [memory.Notifier.Notify] with SELECT pg_notify: the
// note reaches the listeners of every Store on the same schema, in this
// process and the others, once the statement has committed. PostgreSQL
// carries text: a payload that is not UTF-8 or holds a NUL byte is refused.
func (st *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := memory.ValidateNote(channel, payload); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if !utf8.ValidString(payload) || strings.IndexByte(payload, 0) >= 0 {
		return fmt.Errorf("pgstore: notify %q: the payload must be UTF-8 text without NUL bytes", channel)
	}
	if _, err := st.pool.Exec(ctx, "SELECT pg_notify($1, $2)", pgChannel(st.schema, channel), payload); err != nil {
		return fmt.Errorf("pgstore: notify %q: %w", channel, err)
	}
	return nil
}

// Listen implements [memory.Notifier.Listen] with PostgreSQL's LISTEN.
//
// A Store listens on one connection of its own, outside the pool's budget,
// made from the pool's configuration with application_name set to
// "planround listen <schema>". The first Listen opens it and starts one
// goroutine that waits on it and hands each note to the listeners of its
// channel, each of which has its own goroutine and queue (a listener that
// falls more than a thousand notes behind loses them for an empty
// payload). Listen returns once the server listens on the channel, so
// every note sent after it returns is heard. When the connection is lost,
// the goroutine connects again, waiting longer after each failure (up to
// 5s), and then calls every listener with an empty payload: notes may
// have been lost. A Listen that cannot connect returns the error. When the
// last listener stops, or the Store is closed, the goroutine ends and the
// connection is closed.
//
// stop must not be called from fn.
func (st *Store) Listen(ctx context.Context, channel string, fn func(payload string)) (stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: listen to %q: %w", channel, err)
	}
	if channel == "" || fn == nil {
		return nil, fmt.Errorf("pgstore: listen to %q: want a channel name and a function", channel)
	}
	stop, err = st.lis.listen(ctx, pgChannel(st.schema, channel), fn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listen to %q: %w", channel, err)
	}
	return stop, nil
}

// maxIdent is the longest identifier PostgreSQL keeps (NAMEDATALEN - 1).
const maxIdent = 63

// pgChannel returns the PostgreSQL channel of a Notifier channel of schema:
// "planround.<schema>.<channel>" when that is a valid identifier of at most
// 63 bytes and names the pair alone (the schema has no dot), otherwise
// "planround#" and a hash of the pair. It is quoted where it is used, so
// case and punctuation are kept.
func pgChannel(schema, channel string) string {
	name := "planround." + schema + "." + channel
	if len(name) <= maxIdent && !strings.Contains(schema, ".") && utf8.ValidString(name) && strings.IndexByte(name, 0) < 0 {
		return name
	}
	sum := sha256.Sum256([]byte(schema + "\x00" + channel))
	return "planround#" + hex.EncodeToString(sum[:20])
}

// listenAppName is the application_name of the LISTEN connection of a
// Store on schema, cut to what PostgreSQL keeps.
func listenAppName(schema string) string {
	name := "planround listen " + schema
	for len(name) > maxIdent {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// Backoff of the LISTEN connection: after it is lost, it is made again at
// once, then after waits that double from reconnectMin up to reconnectMax.
const (
	reconnectMin   = 50 * time.Millisecond
	reconnectMax   = 5 * time.Second
	connectTimeout = 15 * time.Second
	cleanupWait    = 5 * time.Second
)

// errClosed is the error of a Listen on a closed Store.
var errClosed = errors.New("store closed")

// listener is a Store's LISTEN connection and the listeners of its
// notes. One goroutine (loop) owns the connection: it LISTENs to the
// channels that hub has listeners for, waits for notifications and hands
// them to hub. The loop runs while there are listeners.
type listener struct {
	st  *Store
	hub notehub.Hub // listeners by PostgreSQL channel name

	// mu guards the fields below. Lock order: mu, then hub's own lock.
	mu       sync.Mutex
	closed   bool                    // Close was called
	run      *listenRun              // the running loop; nil when none
	runs     sync.WaitGroup          // loops, until their connection is closed; Add under mu while !closed
	listened map[string]bool         // channels LISTENed on the loop's live connection
	waiters  map[string][]chan error // Listens waiting for their channel to be LISTENed
}

// listenRun is one run of the loop.
type listenRun struct {
	ctx    context.Context
	cancel context.CancelFunc // ends the run (Close)
	kick   chan struct{}      // a token: the listeners changed
	// cancelWait interrupts the wait for a notification; nil outside
	// one. Guarded by listener.mu.
	cancelWait context.CancelFunc
}

// kickLocked tells the loop, if one runs, to look at the listeners again,
// interrupting its wait. The caller holds mu.
func (l *listener) kickLocked() {
	r := l.run
	if r == nil {
		return
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
	if r.cancelWait != nil {
		r.cancelWait()
	}
}

func (l *listener) kick() {
	l.mu.Lock()
	l.kickLocked()
	l.mu.Unlock()
}

// listen adds fn to the listeners of the PostgreSQL channel name and
// returns once the connection listens on it.
func (l *listener) listen(ctx context.Context, name string, fn func(string)) (func(), error) {
	stopHub, err := l.hub.Add(name, fn)
	if err != nil {
		return nil, errClosed
	}
	stop := func() {
		stopHub()
		l.kick() // the loop UNLISTENs, or ends with the last listener
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		stopHub()
		return nil, errClosed
	}
	if l.run != nil && l.listened[name] {
		l.mu.Unlock()
		return stop, nil
	}
	w := make(chan error, 1)
	if l.waiters == nil {
		l.waiters = make(map[string][]chan error)
	}
	l.waiters[name] = append(l.waiters[name], w)
	if l.run == nil {
		ctx, cancel := context.WithCancel(context.Background())
		l.run = &listenRun{ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1)}
		l.runs.Add(1)
		go l.loop(l.run)
	} else {
		l.kickLocked()
	}
	l.mu.Unlock()
	select {
	case err := <-w:
		if err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	case <-ctx.Done():
		l.mu.Lock()
		if ws := l.waiters[name]; ws != nil {
			l.waiters[name] = deleteChan(ws, w)
		}
		l.mu.Unlock()
		stop()
		return nil, ctx.Err()
	}
}

func deleteChan(ws []chan error, w chan error) []chan error {
	out := ws[:0]
	for _, x := range ws {
		if x != w {
			out = append(out, x)
		}
	}
	return out
}

// answerLocked answers the waiters of every channel in names with nil, or
// of every channel with err when names is nil. The caller holds mu.
func (l *listener) answerLocked(names map[string]bool, err error) {
	for name, ws := range l.waiters {
		if names != nil && !names[name] {
			continue
		}
		for _, w := range ws {
			w <- err
		}
		delete(l.waiters, name)
	}
}

// close ends the loop, waiting for its connection to be closed (and for a
// loop that was ending on its own), and stops every listener.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	if l.run != nil {
		l.run.cancel()
	}
	l.mu.Unlock()
	l.runs.Wait()
	l.hub.Close()
}

// connect opens the LISTEN connection from the pool's configuration.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.st.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenAppName(l.st.schema)
	// A cancelled wait only interrupts the read: the connection stays
	// usable, whatever the pool's configuration says.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return pgx.ConnectConfig(ctx, cfg)
}

// loop owns the LISTEN connection of run r; see listener.
func (l *listener) loop(r *listenRun) {
	defer l.runs.Done()
	defer r.cancel()
	var (
		conn     *pgx.Conn
		listened map[string]bool // on conn
		lost     bool            // a connection was lost: tell the listeners once one is back
		backoff  time.Duration   // the last wait before connecting
		nextTry  time.Time       // no connection attempt before
	)
	drop := func() {
		closeConn(conn)
		conn, listened, lost = nil, nil, true
		l.mu.Lock()
		l.listened = nil
		l.mu.Unlock()
	}
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		// Under mu, so that a Listen either sees this run end or is
		// seen by it. A kick after this look interrupts the next wait.
		l.mu.Lock()
		select {
		case <-r.kick:
		default:
		}
		want := l.hub.Keys()
		waiting := len(l.waiters) > 0
		if len(want) == 0 || r.ctx.Err() != nil {
			l.run, l.listened = nil, nil
			l.answerLocked(nil, errClosed)
			l.mu.Unlock()
			return
		}
		// Channels about to be UNLISTENed are no longer listened: a
		// Listen from now on waits for the next LISTEN.
		wantSet := make(map[string]bool, len(want))
		for _, name := range want {
			wantSet[name] = true
		}
		for name := range l.listened {
			if !wantSet[name] {
				delete(l.listened, name)
			}
		}
		l.mu.Unlock()

		if conn == nil {
			// A Listen waiting for its answer tries at once; the
			// listeners already there wait for the next attempt.
			if wait := time.Until(nextTry); wait > 0 && !waiting {
				t := time.NewTimer(wait)
				select {
				case <-r.ctx.Done():
				case <-r.kick:
				case <-t.C:
				}
				t.Stop()
				continue
			}
			c, err := l.connect(r.ctx)
			if err != nil {
				l.mu.Lock()
				l.answerLocked(nil, fmt.Errorf("connect: %w", err))
				l.mu.Unlock()
				backoff = min(max(2*backoff, reconnectMin), reconnectMax)
				nextTry = time.Now().Add(backoff/2 + rand.N(backoff/2))
				continue
			}
			conn, listened, backoff = c, make(map[string]bool), 0
		}

		var failed error
		for _, name := range want {
			if listened[name] {
				continue
			}
			if err := conn.PgConn().Exec(r.ctx, "LISTEN "+pgx.Identifier{name}.Sanitize()).Close(); err != nil {
				failed = err
				break
			}
			listened[name] = true
		}
		for name := range listened {
			if failed != nil || wantSet[name] {
				continue
			}
			if err := conn.PgConn().Exec(r.ctx, "UNLISTEN "+pgx.Identifier{name}.Sanitize()).Close(); err != nil {
				failed = err
				break
			}
			delete(listened, name)
		}
		if failed != nil {
			if r.ctx.Err() == nil {
				// Waiting Listens learn why; the others hear the
				// empty payload once a connection is back.
				l.mu.Lock()
				l.answerLocked(nil, fmt.Errorf("listen: %w", failed))
				l.mu.Unlock()
				backoff = min(max(2*backoff, reconnectMin), reconnectMax)
				nextTry = time.Now().Add(backoff)
			}
			drop()
			continue
		}

		l.mu.Lock()
		l.listened = make(map[string]bool, len(listened))
		for name := range listened {
			l.listened[name] = true
		}
		l.answerLocked(listened, nil)
		waitCtx, cancelWait := context.WithCancel(r.ctx)
		r.cancelWait = cancelWait
		if len(r.kick) > 0 {
			cancelWait() // changed since the look above: look again
		}
		l.mu.Unlock()
		if lost {
			lost = false
			l.hub.DeliverAll("")
		}

		n, err := conn.WaitForNotification(waitCtx)
		l.mu.Lock()
		r.cancelWait = nil
		l.mu.Unlock()
		interrupted := waitCtx.Err() != nil
		cancelWait()
		switch {
		case err == nil:
			l.hub.Deliver(n.Channel, n.Payload)
		case r.ctx.Err() != nil:
			// Closing: the look above ends the run.
		case interrupted && !conn.IsClosed():
			// Kicked: look again.
		default:
			drop() // lost: connect again at once
			nextTry = time.Time{}
		}
	}
}

// closeConn closes c, waiting a little for the server to hear it. A
// connection that broke is closed by pgx in a goroutine of its own, which
// first sends the server a cancel request: closeConn waits for it too, up
// to cleanupWait, so that it does not outlive the Store.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Close(ctx)
	t := time.NewTimer(cleanupWait)
	defer t.Stop()
	select {
	case <-c.PgConn().CleanupDone():
	case <-t.C:
	}
}
