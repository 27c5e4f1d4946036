// Package pgtest gives the tests that need PostgreSQL a server and a schema
// of their own.
//
// The server is the one at PLANROUND_POSTGRES_URL, or DefaultURL (the
// server on this project's machines). A test that cannot reach it is
// skipped with a message saying so, or fails under PLANROUND_REQUIRE_ALL=1,
// as CI runs them.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the test server when PLANROUND_POSTGRES_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// ConfiguredURL returns PLANROUND_POSTGRES_URL, or DefaultURL, without
// checking that anything answers there.
func ConfiguredURL() string {
	if u := os.Getenv("PLANROUND_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// URL returns the test server's URL after checking that it answers; when it
// does not, it skips t, or fails it under PLANROUND_REQUIRE_ALL=1.
func URL(t testing.TB) string {
	t.Helper()
	u := ConfiguredURL()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(context.Background())
	}
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL at %s cannot be reached (%v); set PLANROUND_POSTGRES_URL to a server", Redact(u), err)
		if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
			t.Fatal(msg + " (PLANROUND_REQUIRE_ALL=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	return u
}

// Schema returns the name of a schema no other test uses, prefix followed
// by random hex. It is dropped, with everything in it, when t ends: after
// whatever t started later, since cleanups run last first.
func Schema(t testing.TB, url, prefix string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// Redact returns u without its password, if it has one.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}
