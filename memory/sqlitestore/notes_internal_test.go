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
		p := &poller{st: st, conn: conn, renewed: time.Now()}
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
