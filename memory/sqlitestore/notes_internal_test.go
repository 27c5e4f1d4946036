package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/planround/planround/memory"
)

// BenchmarkPollIdle: one op is what the poller of a Store with listeners
// does at each tick (four times a second) while nothing is written to the
// file: it reads PRAGMA data_version, finds it unchanged, and reads
// nothing else. "session read" is a Store.Session, the cheapest read of
// the API, to compare.
func BenchmarkPollIdle(b *testing.B) {
	st, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := b.Context()
	b.Run("poll", func(b *testing.B) {
		conn, err := st.p.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		p := &poller{st: st, conn: conn, renew: time.Now().Add(time.Hour).UnixNano()}
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&p.version); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p.poll(ctx)
		}
		if p.last != 0 {
			b.Fatalf("the idle poller read notes up to %d", p.last)
		}
	})
	if _, err := st.CreateSession(ctx, memory.Session{ID: "s"}); err != nil {
		b.Fatal(err)
	}
	b.Run("session read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Session(ctx, "s"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPollAfterSleep: a poller whose Store's row in note_listeners expired
// before it was renewed (the process was stopped, or the machine slept, so
// the others skipped their notes) renews it and tells every listener that
// notes may have been lost; one renewed in time tells nothing.
func TestPollAfterSleep(t *testing.T) {
	ctx := t.Context()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	heard := make(chan string, 10)
	stop, err := st.notes.Add("c", func(p string) { heard <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	conn, err := st.p.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	listeners := func() (n int) {
		if err := st.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM note_listeners WHERE store = ? AND expires_at > ?", st.id, time.Now().UnixNano()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	now := time.Now().UnixNano()
	p := &poller{st: st, conn: conn, expires: now - 1, renew: now - 1}
	p.poll(ctx)
	select {
	case got := <-heard:
		if got != "" {
			t.Errorf("heard %q, want the empty payload", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no empty payload after the row expired")
	}
	if n := listeners(); n != 1 {
		t.Errorf("%d live rows of the Store after the poll, want 1", n)
	}

	p.renew = time.Now().UnixNano() - 1 // due, and the row has not expired
	p.poll(ctx)
	st.notes.Deliver("c", "after") // comes after anything the poll queued
	select {
	case got := <-heard:
		if got != "after" {
			t.Errorf("heard %q after a renewal in time", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listener heard nothing")
	}
}
