package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// Replicas. With a *pgstore.Store (-postgres) the Server is one replica of
// many behind a load balancer, with no stickiness: a browser's requests
// may reach any of them. What they share, through PostgreSQL:
//
//   - the conversations, the open tool calls, the approvals and the
//     sessions' leases (the Store): a decision posted to any replica is
//     taken once, wakes the run that waits for it on another one (the
//     Store's Notifier), or resumes the turn where it is posted when no run
//     waits for it any more;
//   - the turn log (table webchat_events, beside the Store's tables): the
//     replica that drives a run writes each of its events there, numbered
//     per session, and a note on the Store's Notifier (channel
//     webchat_events, "<seq> <session>") wakes the other replicas, whose
//     event streams of that session read the new rows. A page that reloads
//     mid-run on any replica gets the turn's events from the log;
//   - interruptions: POST /api/interrupt on a replica that does not drive
//     the run sends a note (channel webchat_interrupt) to the one that
//     does.
//
// Nothing else needs sharing: an owner cookie is checked against the
// session id it made (a hash, access.go), which every replica computes the
// same way; an access token (-token) must be given to every replica.
// ask_user_question forms live on the replica that runs the call: an
// answer posted to another one is refused ("no longer open").
//
// Without a shared log (a single process) none of this costs anything: the
// turn log is in memory (turnlog.go).

// Notifier channels of the replicas.
const (
	eventsChannel    = "webchat_events"
	interruptChannel = "webchat_interrupt"
)

// pgLog is the turn log in PostgreSQL.
type pgLog struct {
	pool     *pgxpool.Pool
	notifier memory.Notifier
	logger   interface {
		Warn(msg string, args ...any)
	}
	events, seqs string // the tables' names, quoted and qualified

	// stops are the Notifier listeners' stop functions, called by close.
	stops []func()

	mu    sync.Mutex       // guards dirty
	dirty map[string]int64 // sessions whose streams may have events to read, and the last number noted; nil: every session with a stream
	wake  chan struct{}    // has an element when dirty has news

	// The notes to send, sent by the notifier goroutine: a burst of
	// events of one session makes one note, and the run that writes them
	// does not wait for it.
	noteMu   sync.Mutex       // guards notes
	notes    map[string]int64 // session → the number of its last event not noted yet
	noteWake chan struct{}    // has an element when notes has news
	noteStop chan struct{}    // closed by close: send what is left and end
	noteDone chan struct{}    // closed when the notifier goroutine ended
}

// pgMigration creates the log's tables; %[1]s is the quoted schema.
const pgMigration = `
CREATE TABLE IF NOT EXISTS %[1]s.webchat_event_seq (
	session_id text PRIMARY KEY,
	last bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS %[1]s.webchat_events (
	session_id text NOT NULL,
	seq bigint NOT NULL,
	turn bigint NOT NULL,
	name text NOT NULL,
	data text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS webchat_events_name ON %[1]s.webchat_events (name, created_at)
	WHERE name IN ('run_started', 'run_done', 'session_deleted');
`

// startShared makes s a replica when store is a *pgstore.Store: the turn
// log in its database, and the Notifier listeners.
func (s *Server) startShared(store memory.Store) error {
	pg, ok := store.(*pgstore.Store)
	if !ok {
		return nil
	}
	notifier, ok := store.(memory.Notifier)
	if !ok {
		return errors.New("webchat: the PostgreSQL store has no Notifier: it cannot wake other replicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := pgx.Identifier{pg.Schema()}.Sanitize()
	// A pool of its own, whose commits do not wait for the disk: the log
	// holds copies of a run's events for the pages that reload (the
	// conversation itself is in the Store, committed as usual), and an
	// event per streamed delta would otherwise wait for a flush each.
	cfg := pg.Pool().Config()
	cfg.MaxConns = 4
	cfg.MinConns = 0
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.ConnConfig.RuntimeParams["application_name"] = "planround webchat turn log"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("webchat: connecting for the turn log: %w", err)
	}
	l := &pgLog{
		pool:     pool,
		notifier: notifier,
		logger:   s.logger,
		events:   schema + ".webchat_events",
		seqs:     schema + ".webchat_event_seq",
		dirty:    make(map[string]int64),
		wake:     make(chan struct{}, 1),
		notes:    make(map[string]int64),
		noteWake: make(chan struct{}, 1),
		noteStop: make(chan struct{}),
		noteDone: make(chan struct{}),
	}
	// One migrating replica at a time: CREATE ... IF NOT EXISTS is not safe
	// against a concurrent one.
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "planround/webchat:"+pg.Schema()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(pgMigration, schema))
		return err
	})
	if err != nil {
		pool.Close()
		return fmt.Errorf("webchat: creating the turn log's tables: %w", err)
	}
	stop, err := notifier.Listen(ctx, eventsChannel, l.noted)
	if err != nil {
		pool.Close()
		return fmt.Errorf("webchat: listening for the turn log's notes: %w", err)
	}
	l.stops = append(l.stops, stop)
	go l.notifyLoop()
	stop, err = notifier.Listen(ctx, interruptChannel, s.interruptNoted)
	if err != nil {
		l.close()
		return fmt.Errorf("webchat: listening for interruptions: %w", err)
	}
	l.stops = append(l.stops, stop)
	s.shared = l
	sum := sha256.Sum256([]byte("planround webchat log\x00" + pg.Schema()))
	s.info.Log = "shared-" + hex.EncodeToString(sum[:8])
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		s.follow()
	}()
	return nil
}

// close sends the notes not sent yet and stops the listeners. The runs
// must have ended.
func (l *pgLog) close() {
	close(l.noteStop)
	<-l.noteDone
	for _, stop := range l.stops {
		stop()
	}
	l.pool.Close()
}

// noteLater has the notifier goroutine tell the other replicas that the
// session's log goes up to seq.
func (l *pgLog) noteLater(id string, seq int64) {
	l.noteMu.Lock()
	l.notes[id] = max(l.notes[id], seq)
	l.noteMu.Unlock()
	select {
	case l.noteWake <- struct{}{}:
	default:
	}
}

// notifyLoop sends the notes of noteLater until close.
func (l *pgLog) notifyLoop() {
	defer close(l.noteDone)
	for {
		stopping := false
		select {
		case <-l.noteWake:
		case <-l.noteStop:
			stopping = true
		}
		l.noteMu.Lock()
		notes := l.notes
		l.notes = make(map[string]int64)
		l.noteMu.Unlock()
		for id, seq := range notes {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if err := l.notifier.Notify(ctx, eventsChannel, strconv.FormatInt(seq, 10)+" "+id); err != nil {
				l.logger.Warn("webchat: telling the other replicas about an event", "session", id, "err", err)
			}
			cancel()
		}
		if stopping {
			return
		}
	}
}

// opTimeout bounds one statement of the log.
const opTimeout = 10 * time.Second

// append numbers ev in the session's log, writes it, and tells the other
// replicas. It returns ev numbered; when the database fails, it logs why
// and returns ev unnumbered (the streams of this process still get it).
// ctx ending does not stop it: a run's last events are written as the
// server shuts down.
func (l *pgLog) append(ctx context.Context, id string, ev event) event {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	// The seq row is locked until the insert commits: events of one
	// session are numbered without a gap, in the order they commit.
	q := `WITH n AS (
		INSERT INTO ` + l.seqs + ` AS q (session_id, last) VALUES ($1, 1)
		ON CONFLICT (session_id) DO UPDATE SET last = q.last + 1
		RETURNING last)
	INSERT INTO ` + l.events + ` (session_id, seq, turn, name, data)
	SELECT $1, n.last, CASE WHEN $3 = 'run_started' THEN n.last ELSE $2::bigint END, $3, $4 FROM n
	RETURNING seq, turn`
	var seq, turn int64
	if err := l.pool.QueryRow(ctx, q, id, ev.turn, ev.name, string(ev.data)).Scan(&seq, &turn); err != nil {
		l.logger.Warn("webchat: writing an event to the turn log", "session", id, "event", ev.name, "err", err)
		return ev
	}
	ev.seq, ev.turn = seq, turn
	l.noteLater(id, seq)
	return ev
}

// since returns the session's logged events after seq after, and false
// when the log no longer holds every one of them.
func (l *pgLog) since(ctx context.Context, id string, after int64) ([]event, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var last int64
	err := l.pool.QueryRow(ctx, `SELECT last FROM `+l.seqs+` WHERE session_id = $1`, id).Scan(&last)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("reading the turn log: %w", err)
	}
	switch {
	case after == last:
		return nil, true, nil
	case after > last:
		return nil, false, nil
	}
	rows, err := l.pool.Query(ctx, `SELECT seq, turn, name, data FROM `+l.events+` WHERE session_id = $1 AND seq > $2 ORDER BY seq`, id, after)
	if err != nil {
		return nil, false, fmt.Errorf("reading the turn log: %w", err)
	}
	var out []event
	for rows.Next() {
		var (
			ev   event
			data string
		)
		if err := rows.Scan(&ev.seq, &ev.turn, &ev.name, &data); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("reading the turn log: %w", err)
		}
		if ev.seq != after+1+int64(len(out)) {
			rows.Close()
			return nil, false, nil // dropped events
		}
		ev.data = []byte(data)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("reading the turn log: %w", err)
	}
	return out, len(out) > 0, nil
}

// state returns what the session's log says now.
func (l *pgLog) state(ctx context.Context, id string) (logState, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var (
		last, turn *int64
		data       *string
		done       bool
	)
	err := l.pool.QueryRow(ctx, `SELECT q.last, r.seq, r.data,
		EXISTS (SELECT 1 FROM `+l.events+` d WHERE d.session_id = x.id AND d.name = 'run_done' AND d.turn = r.seq)
	FROM (SELECT $1::text AS id) x
	LEFT JOIN `+l.seqs+` q ON q.session_id = x.id
	LEFT JOIN LATERAL (SELECT seq, data FROM `+l.events+` WHERE session_id = x.id AND name = 'run_started' ORDER BY seq DESC LIMIT 1) r ON true`,
		id).Scan(&last, &turn, &data, &done)
	if err != nil {
		return logState{}, fmt.Errorf("reading the turn log: %w", err)
	}
	var ls logState
	if last != nil {
		ls.Last = *last
	}
	if turn != nil && !done {
		ls.Turn = *turn
		if err := json.Unmarshal([]byte(*data), &ls.Started); err != nil {
			return logState{}, fmt.Errorf("reading the turn log: run_started %d: %w", *turn, err)
		}
	}
	return ls, nil
}

// running returns those of the sessions ids whose log has a run in
// progress.
func (l *pgLog) running(ctx context.Context, ids []string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT DISTINCT r.session_id FROM `+l.events+` r
	WHERE r.session_id = ANY($1) AND r.name = 'run_started'
	AND NOT EXISTS (SELECT 1 FROM `+l.events+` d WHERE d.session_id = r.session_id AND d.name = 'run_done' AND d.turn = r.seq)
	AND NOT EXISTS (SELECT 1 FROM `+l.events+` n WHERE n.session_id = r.session_id AND n.name = 'run_started' AND n.seq > r.seq)`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the turn log: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading the turn log: %w", err)
	}
	out := make(map[string]bool, len(list))
	for _, id := range list {
		out[id] = true
	}
	return out, nil
}

// touch has the follower read the session's log for its streams: a
// reservation of a run that did not happen here made it skip the notes
// that came meanwhile.
func (l *pgLog) touch(id string) {
	l.mu.Lock()
	if l.dirty != nil {
		l.dirty[id] = math.MaxInt64
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// noted is the listener of eventsChannel: it marks the session's streams
// as having events to read, and wakes the follower.
func (l *pgLog) noted(payload string) {
	l.mu.Lock()
	if payload == "" {
		l.dirty = nil // notes were lost: every stream looks
	} else if n, id, ok := strings.Cut(payload, " "); ok && l.dirty != nil {
		seq, err := strconv.ParseInt(n, 10, 64)
		if err == nil {
			l.dirty[id] = max(l.dirty[id], seq)
		}
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// follow sends the events that other replicas write to the turn log to
// this process's event streams, until Close.
func (s *Server) follow() {
	l := s.shared
	for {
		select {
		case <-s.stopped:
			return
		case <-l.wake:
		}
		l.mu.Lock()
		dirty := l.dirty
		l.dirty = make(map[string]int64)
		l.mu.Unlock()

		// Each stream reads from the last event it has: from the
		// session's furthest behind.
		s.mu.Lock()
		type todo struct {
			ss   *session
			from int64
		}
		var work []todo
		for id, ss := range s.sessions {
			// A run of this process sends its events itself; the others
			// cannot run meanwhile (the lease). A reservation that ends
			// without a run touches the session (unreserve).
			if len(ss.subs) == 0 || ss.run != nil {
				continue
			}
			noted, ok := dirty[id]
			if !ok && dirty != nil {
				continue
			}
			from := int64(-1)
			for sub := range ss.subs {
				if from < 0 || sub.last < from {
					from = sub.last
				}
			}
			if dirty != nil && noted <= from {
				continue // every stream has it
			}
			work = append(work, todo{ss, from})
		}
		s.mu.Unlock()

		for _, w := range work {
			evs, complete, err := l.since(s.base, w.ss.id, w.from)
			if err != nil {
				if s.base.Err() == nil {
					s.logger.Warn("webchat: reading the turn log", "session", w.ss.id, "err", err)
				}
				continue
			}
			s.mu.Lock()
			if !complete {
				// Too far behind: its page loads the history again.
				for sub := range w.ss.subs {
					if sub.last == w.from {
						sub.push(&event{name: "reload", data: mustJSON(struct{}{})}) // when full, it is dropped anyway
					}
				}
			}
			for _, ev := range evs {
				s.fanoutLocked(w.ss, ev)
			}
			s.mu.Unlock()
		}
	}
}

// interruptElsewhere asks the replica that drives the session's run to
// interrupt it, and reports whether the log says a run is in progress.
func (s *Server) interruptElsewhere(id string) bool {
	ctx, cancel := context.WithTimeout(s.base, opTimeout)
	defer cancel()
	ls, err := s.shared.state(ctx, id)
	if err != nil || !ls.running() {
		return false
	}
	if err := s.shared.notifier.Notify(ctx, interruptChannel, id); err != nil {
		s.logger.Warn("webchat: asking another replica to interrupt a run", "session", id, "err", err)
		return false
	}
	return true
}

// interruptNoted is the listener of interruptChannel: it interrupts the
// session's run if this process drives it.
func (s *Server) interruptNoted(id string) {
	if id == "" || checkSessionID(id) != nil {
		return
	}
	s.mu.Lock()
	ss := s.sessions[id]
	running := ss != nil && ss.run != nil
	if running {
		ss.run.cancel(errInterrupted)
	}
	s.mu.Unlock()
	if running {
		s.forms.CancelSession(id)
	}
}

// sweep trims the turn log: the events of turns that ended turnGrace ago
// go; and it ends the turns whose replica stopped without ending them,
// when no replica drives them (their lease is free).
func (l *pgLog) sweep(ctx context.Context, s *Server) {
	grace := fmt.Sprintf("%d milliseconds", turnGrace.Milliseconds())
	if _, err := l.pool.Exec(ctx, `DELETE FROM `+l.events+` e WHERE e.turn <> 0 AND EXISTS (
		SELECT 1 FROM `+l.events+` d WHERE d.session_id = e.session_id AND d.turn = e.turn AND d.name = 'run_done'
		AND d.created_at < now() - $1::interval)`, grace); err != nil {
		if ctx.Err() == nil {
			l.logger.Warn("webchat: trimming the turn log", "err", err)
		}
		return
	}
	if _, err := l.pool.Exec(ctx, `DELETE FROM `+l.events+` WHERE name = 'session_deleted' AND created_at < now() - $1::interval`, grace); err != nil {
		return
	}
	if s.leaser == nil {
		return
	}
	// A run whose replica stopped: no event for two lease times, and its
	// lease free.
	quiet := fmt.Sprintf("%d milliseconds", (2 * s.ttl).Milliseconds())
	rows, err := l.pool.Query(ctx, `SELECT r.session_id, r.seq FROM `+l.events+` r
	WHERE r.name = 'run_started'
	AND NOT EXISTS (SELECT 1 FROM `+l.events+` d WHERE d.session_id = r.session_id AND d.name = 'run_done' AND d.turn = r.seq)
	AND NOT EXISTS (SELECT 1 FROM `+l.events+` n WHERE n.session_id = r.session_id AND n.created_at >= now() - $1::interval)`, quiet)
	if err != nil {
		return
	}
	type stale struct {
		id   string
		turn int64
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stale, error) {
		var st stale
		return st, row.Scan(&st.id, &st.turn)
	})
	if err != nil {
		return
	}
	for _, st := range list {
		s.endStale(ctx, st.id, st.turn)
	}
}

// endStale ends the turn of a session whose replica stopped while it ran,
// unless a replica drives it: its pages get a run_done, suspended when
// calls wait for decisions (a decision resumes the turn), interrupted
// otherwise.
func (s *Server) endStale(ctx context.Context, id string, turn int64) {
	s.mu.Lock()
	ss := s.sessionLocked(id)
	if s.closed || ss.run != nil {
		s.forgetLocked(ss)
		s.mu.Unlock()
		return
	}
	run := s.reserveLocked(ss, func(error) {})
	s.mu.Unlock()
	held, err := s.lease(ctx, id)
	if !held || err != nil {
		s.unreserve(ss, run)
		return
	}
	// Read again under the lease: the turn may have ended meanwhile.
	if ls, err := s.shared.state(ctx, id); err != nil || ls.Turn != turn {
		s.releaseLease(id)
		s.unreserve(ss, run)
		return
	}
	done := runDone{Status: "interrupted", Reason: "the server that ran it stopped", Turn: turn}
	if open, err := s.openCalls(ctx, id); err == nil && len(open) > 0 {
		done.Status = "suspended"
	}
	s.finish(ss, event{name: "run_done", data: mustJSON(done), turn: turn})
}
