package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/sqlitestore"
	"github.com/planround/planround/memory/storetest"
)

func TestOpenSQLiteBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"text file", write("notes.txt", []byte("hello, this is not a database\n")), "not a SQLite database"},
		{"short file", write("short", []byte("SQL")), "not a SQLite database"},
		{"json file", write("data.json", []byte(`{"format":"planround.session/v1"}`)), "not a SQLite database"},
		{"directory", dir, "directory"},
		{"empty path", "", "want a file path"},
		{"memory", ":memory:", "want a file path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before []byte
			if fi, err := os.Stat(tt.path); err == nil && !fi.IsDir() {
				before, _ = os.ReadFile(tt.path)
			}
			st, err := sqlitestore.Open(t.Context(), tt.path)
			if err == nil {
				st.Close()
				t.Fatalf("OpenSQLite(%q): got nil error", tt.path)
			}
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), tt.path, "error must name the path")
			if before != nil {
				after, _ := os.ReadFile(tt.path)
				assert.Equal(t, before, after, "file was changed")
				_, werr := os.Stat(tt.path + "-wal")
				assert.True(t, errors.Is(werr, os.ErrNotExist), "a -wal file was created")
			}
		})
	}
}

// rawDB opens path with the driver directly, for tests that prepare or
// inspect a database behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenSQLiteSchema(t *testing.T) {
	ctx := t.Context()
	t.Run("version recorded and reopen keeps data", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "db")
		st, err := sqlitestore.Open(ctx, path)
		require.NoError(t, err)
		_, err = st.CreateSession(ctx, memory.Session{ID: "s"})
		require.NoError(t, err)
		_, err = st.Append(ctx, "s", userMsg("kept"))
		require.NoError(t, err)
		require.NoError(t, st.Close())

		var version int
		var mode string
		db := rawDB(t, path)
		require.NoError(t, db.QueryRow("PRAGMA user_version").Scan(&version))
		require.NoError(t, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
		assert.Equal(t, currentVersion, version)
		assert.Equal(t, "wal", mode)
		db.Close()

		st = openSQLite(t, path)
		got, err := st.Messages(ctx, "s", true)
		require.NoError(t, err)
		assert.Equal(t, []string{"kept"}, []string{got[0].Content})
	})
	t.Run("newer schema refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "db")
		openSQLite(t, path).Close()
		db := rawDB(t, path)
		_, err := db.Exec("PRAGMA user_version = 99")
		require.NoError(t, err)
		db.Close()
		_, err = sqlitestore.Open(ctx, path)
		require.ErrorIs(t, err, sqlitestore.ErrSchemaTooNew)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "99")
	})
	t.Run("another application's database refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "db")
		db := rawDB(t, path)
		_, err := db.Exec("PRAGMA application_id = 1234; CREATE TABLE t (x)")
		require.NoError(t, err)
		db.Close()
		_, err = sqlitestore.Open(ctx, path)
		require.ErrorContains(t, err, "another application")
	})
	t.Run("concurrent openers migrate once", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "db")
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				st, err := sqlitestore.Open(ctx, path)
				if err == nil {
					err = st.Close()
				}
				errs <- err
			}()
		}
		for range 4 {
			assert.NoError(t, <-errs)
		}
	})
}

// Two stores on one file, as two processes would have: writes of both are
// whole and visible to each other.
func TestSQLiteTwoStoresOneFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	a, b := openSQLite(t, path), openSQLite(t, path)
	_, err := a.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	done := make(chan error, 2)
	for _, st := range []*sqlitestore.Store{a, b} {
		go func() {
			for i := range 20 {
				if _, err := st.Append(ctx, "s", userMsg(strconv.Itoa(i)), asst(strconv.Itoa(i))); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	got, err := b.Messages(ctx, "s", true)
	require.NoError(t, err)
	require.Len(t, got, 80)
	for i := 0; i < len(got); i += 2 {
		assert.Equal(t, got[i].Content, got[i+1].Content, "batch torn at %d", i)
	}
}

// crashEnv, when set, makes TestSQLiteCrashSafety the child process that
// appends to the database it names until it is killed.
const crashEnv = "PLANROUND_MEMORY_CRASH_DB"

// crashBatch is the number of messages the child appends per call.
const crashBatch = 7

func TestSQLiteCrashSafety(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteCrashSafety$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// Wait for some appends to have happened, then kill mid-loop.
	const wantBatches = 30
	sc := bufio.NewScanner(out)
	seen := 0
	for seen < wantBatches && sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "appended "); ok {
			seen, _ = strconv.Atoi(n)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.GreaterOrEqual(t, seen, wantBatches, "child stderr: %s", stderr.String())

	db := rawDB(t, path)
	var check string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check)
	db.Close()

	st := openSQLite(t, path)
	msgs, err := st.Messages(t.Context(), "crash", true)
	require.NoError(t, err)
	require.Zero(t, len(msgs)%crashBatch, "%d messages: a batch was torn", len(msgs))
	require.GreaterOrEqual(t, len(msgs)/crashBatch, seen, "acknowledged batches lost")
	for i, m := range msgs {
		if want := fmt.Sprintf("%d/%d", i/crashBatch, i%crashBatch); m.Content != want {
			t.Fatalf("message %d = %q, want %q", i, m.Content, want)
		}
	}
	// The database is still writable.
	_, err = st.Append(t.Context(), "crash", userMsg("after"))
	require.NoError(t, err)
}

// crashChild appends batches in a loop, printing progress, until it is
// killed (or gives up after a bounded number of batches).
func crashChild(path string) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := st.CreateSession(ctx, memory.Session{ID: "crash"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := range 100_000 {
		batch := make([]memory.Message, crashBatch)
		for j := range batch {
			batch[j] = userMsg(fmt.Sprintf("%d/%d", i, j))
		}
		if _, err := st.Append(ctx, "crash", batch...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("appended %d\n", i+1)
	}
	os.Exit(3)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store { return openSQLite(t, filepath.Join(t.TempDir(), "db.sqlite")) })
}

func openSQLite(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

func userMsg(text string) memory.Message { return memory.Message{Role: memory.RoleUser, Content: text} }

func asst(text string) memory.Message {
	return memory.Message{Role: memory.RoleAssistant, Content: text}
}

// TestArchiveUsesActiveIndex: Summarize finds the active messages of its
// range in the partial index of active messages, before and after ANALYZE
// has given the planner statistics of a session whose messages are mostly
// archived; a plan that scans the range (the primary key, or
// messages_session) would make n summaries of one range cost n².
func TestArchiveUsesActiveIndex(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	st := openSQLite(t, path)
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	msgs := make([]memory.Message, 1000)
	for i := range msgs {
		msgs[i] = memory.Message{Role: memory.RoleUser, Content: fmt.Sprint(i)}
	}
	out, err := st.Append(ctx, "s", msgs...)
	require.NoError(t, err)
	_, err = st.Summarize(ctx, "s", memory.Summary{Content: "most", FirstID: out[0].ID, LastID: out[989].ID})
	require.NoError(t, err)

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	plan := func() string {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+sqlitestore.ArchiveSQL, 2, "s", out[0].ID, out[999].ID)
		require.NoError(t, err)
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			b.WriteString(detail + "\n")
		}
		require.NoError(t, rows.Err())
		return b.String()
	}
	assert.Contains(t, plan(), "USING INDEX messages_active")

	rw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer rw.Close()
	_, err = rw.ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	assert.Contains(t, plan(), "USING INDEX messages_active", "after ANALYZE")
}
