package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/internal/leaktest"
	"github.com/planround/planround/internal/pgtest"
	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
	"github.com/planround/planround/memory/storetest"
)

// childEnv names, in a child process of TestMigrateProcesses, the schema it
// opens.
const childEnv = "PGSTORE_TEST_CHILD_SCHEMA"

func TestMain(m *testing.M) {
	if schema := os.Getenv(childEnv); schema != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := pgstore.Open(ctx, pgtest.ConfiguredURL(), pgstore.WithSchema(schema))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		st.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// open opens a store on schema, closed when t ends.
func open(t testing.TB, url, schema string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

func TestConformance(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	storetest.Run(t, func(t *testing.T) memory.Store { return open(t, url, freshSchema(t, url)) })
}

// TestTwoStoresConcurrentAppends appends to one session from two stores with
// a pool each, as two processes would: every message is kept, ids increase
// in the order each writer appended, and no id is shared.
func TestTwoStoresConcurrentAppends(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	stores := []*pgstore.Store{open(t, url, schema), open(t, url, schema)}
	ctx := t.Context()
	_, err := stores[0].CreateSession(ctx, memory.Session{ID: "shared"})
	require.NoError(t, err)

	const writersPerStore, perWriter = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*writersPerStore)
	for si, st := range stores {
		for w := range writersPerStore {
			wg.Go(func() {
				for i := range perWriter {
					// Every third append carries two messages: all or none.
					msgs := []memory.Message{{Role: memory.RoleUser, Content: fmt.Sprintf("%d/%d/%d", si, w, i)}}
					if i%3 == 0 {
						msgs = append(msgs, memory.Message{Role: memory.RoleAssistant, Content: fmt.Sprintf("%d/%d/%d+", si, w, i)})
					}
					if _, err := st.Append(ctx, "shared", msgs...); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got, err := stores[1].Messages(ctx, "shared", true)
	require.NoError(t, err)
	want := 2 * writersPerStore * (perWriter + (perWriter+2)/3)
	require.Len(t, got, want, "messages lost or duplicated")
	last := map[string]int{} // writer -> last index seen
	for i, m := range got {
		if i > 0 {
			require.Greater(t, m.ID, got[i-1].ID, "ids must increase in append order")
		}
		var si, w, n int
		_, err := fmt.Sscanf(strings.TrimSuffix(m.Content, "+"), "%d/%d/%d", &si, &w, &n)
		require.NoError(t, err)
		key := fmt.Sprint(si, "/", w)
		if strings.HasSuffix(m.Content, "+") {
			// The second message of a pair follows its first at once.
			require.Equal(t, strings.TrimSuffix(m.Content, "+"), got[i-1].Content, "a pair was split")
			continue
		}
		if prev, ok := last[key]; ok {
			require.Equal(t, prev+1, n, "writer %s: appends out of order", key)
		}
		last[key] = n
	}
	require.Len(t, last, 2*writersPerStore)

	// The other store sees the same messages.
	other, err := stores[0].Messages(ctx, "shared", true)
	require.NoError(t, err)
	require.Equal(t, len(got), len(other))
}

// TestMigrateConcurrently opens one fresh schema from several pools at once:
// all succeed, and the schema is migrated once.
func TestMigrateConcurrently(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	const n = 8
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = pgstore.Open(t.Context(), url, pgstore.WithSchema(schema)) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "opener %d", i)
		t.Cleanup(stores[i].Close)
	}
	checkVersion(t, url, schema)
	// Every store works on the shared schema.
	ctx := t.Context()
	_, err := stores[0].CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	for i, st := range stores {
		_, err := st.Append(ctx, "s", memory.Message{Role: memory.RoleUser, Content: fmt.Sprint(i)})
		require.NoError(t, err)
	}
	got, err := stores[n-1].Messages(ctx, "s", false)
	require.NoError(t, err)
	assert.Len(t, got, n)
}

// TestMigrateProcesses opens one fresh schema from several processes at
// once.
func TestMigrateProcesses(t *testing.T) {
	url := server(t)
	schema := freshSchema(t, url)
	exe, err := os.Executable()
	require.NoError(t, err)
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmds[i] = exec.CommandContext(ctx, exe, "-test.run=^$")
		cmds[i].Env = append(os.Environ(), childEnv+"="+schema, "PLANROUND_POSTGRES_URL="+url)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		require.NoError(t, cmds[i].Start())
	}
	for i, c := range cmds {
		require.NoError(t, c.Wait(), "process %d: %s", i, outs[i].String())
	}
	checkVersion(t, url, schema)
}

// checkVersion checks that schema holds one version row, the current one,
// and the tables of the store.
func checkVersion(t *testing.T, url, schema string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT version FROM "+pgx.Identifier{schema, "schema_version"}.Sanitize())
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	assert.Equal(t, []int32{currentVersion}, versions)
	rows, err = conn.Query(ctx, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"api_calls", "approvals", "events", "kv", "leases", "messages", "open_calls", "schema_version", "sessions", "summaries"}, tables)
}

// currentVersion is the schema version this version of the store writes.
const currentVersion = 9

func TestSchemaTooNew(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	schema := freshSchema(t, url)
	st := open(t, url, schema)
	_, err := st.Pool().Exec(t.Context(), "UPDATE "+pgx.Identifier{schema, "schema_version"}.Sanitize()+" SET version = 99")
	require.NoError(t, err)
	_, err = pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	require.ErrorIs(t, err, pgstore.ErrSchemaTooNew)
	assert.Contains(t, err.Error(), schema)
}

// TestNewKeepsPool checks that a store made with New leaves the caller's
// pool open, and that stores on different schemas share nothing.
func TestNewKeepsPool(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	a, err := pgstore.New(t.Context(), pool, pgstore.WithSchema(freshSchema(t, url)))
	require.NoError(t, err)
	b, err := pgstore.New(t.Context(), pool, pgstore.WithSchema(freshSchema(t, url)))
	require.NoError(t, err)
	_, err = a.CreateSession(t.Context(), memory.Session{ID: "only-in-a"})
	require.NoError(t, err)
	a.Close()
	require.NoError(t, pool.Ping(t.Context()), "Close closed the caller's pool")
	_, err = b.Session(t.Context(), "only-in-a")
	require.ErrorIs(t, err, memory.ErrNotFound)
	list, err := b.Sessions(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list)
}

// TestOpenErrors checks that a bad URL and a server that does not answer
// are errors that say so, without a password in them.
func TestOpenErrors(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := pgstore.Open(ctx, "not a url ::::")
	require.Error(t, err)
	_, err = pgstore.Open(ctx, "postgres://user:secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")
	_, err = pgstore.Open(ctx, pgtest.ConfiguredURL(), pgstore.WithSchema(""))
	require.Error(t, err)
}

// TestContentBytes keeps content the way Go holds it, including what a
// PostgreSQL text column refuses.
func TestContentBytes(t *testing.T) {
	leaktest.Check(t)
	url := server(t)
	st := open(t, url, freshSchema(t, url))
	ctx := t.Context()
	_, err := st.CreateSession(ctx, memory.Session{ID: "s"})
	require.NoError(t, err)
	contents := []string{"nul \x00 inside", "bad utf-8 \xff\xfe", ""}
	for _, c := range contents {
		_, err := st.Append(ctx, "s", memory.Message{Role: memory.RoleUser, Content: c})
		require.NoError(t, err)
	}
	got, err := st.Messages(ctx, "s", false)
	require.NoError(t, err)
	var back []string
	for _, m := range got {
		back = append(back, m.Content)
	}
	assert.True(t, slices.Equal(contents, back), "got %q", back)
	// An append to a missing session is ErrNotFound and adds nothing.
	_, err = st.Append(ctx, "missing", memory.Message{Role: memory.RoleUser, Content: "x"})
	require.True(t, errors.Is(err, memory.ErrNotFound), "err = %v", err)
}

// server returns the test server's URL (see pgtest.URL).
func server(t testing.TB) string { t.Helper(); return pgtest.URL(t) }

// freshSchema returns a schema of t's own, dropped when t ends.
func freshSchema(t testing.TB, url string) string {
	t.Helper()
	return pgtest.Schema(t, url, "planround_test_")
}
