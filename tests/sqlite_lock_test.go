package tests

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// holdSQLiteWriteLock takes the write lock of the SQLite file at path from a
// connection of its own (BEGIN IMMEDIATE), as another process writing to the
// file would, and returns the function that lets it go again (also run when
// the test ends).
func holdSQLiteWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Errorf("let the write lock go: %v", err)
		}
		conn.Close()
		other.Close()
	}
	t.Cleanup(release)
	return release
}

// A write that meets the SQLite write lock held by another connection (a
// `licensor token issue`, a backup tool, a second process) waits at most
// about DB_QUERY_TIMEOUT, then answers the usual 503 temporarily_unavailable
// with Retry-After, and nothing reaches the vendor; it used to wait the whole
// 10 s busy timeout whatever DB_QUERY_TIMEOUT said. Once the lock is let go,
// the same keyed create succeeds.
func TestSQLiteLockWaitEndsWithinTheQueryTimeout(t *testing.T) {
	const queryTimeout = 300 * time.Millisecond
	seeded := testdb.New(t, database.SQLite)
	cfg := seeded.Config
	cfg.QueryTimeout = queryTimeout
	ctx := context.Background()
	writer, err := database.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(writer) })
	reader, err := database.OpenReader(ctx, cfg, writer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(reader) })
	a := newApp(t, &testdb.DB{Dialect: database.SQLite, Config: cfg, Gorm: writer, Read: reader})
	acme := a.consumer("acme")

	release := holdSQLiteWriteLock(t, cfg.Database)
	for _, headers := range [][]string{keyed(acme, "order-lock-1"), acme} {
		began := time.Now()
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, headers...)
		took := time.Since(began)
		t.Logf("create while the write lock is held elsewhere: %d in %s", r.Code, took.Round(time.Millisecond))
		r.wantUnavailable()
		if took > 3*time.Second {
			t.Errorf("the create waited %s for the lock with DB_QUERY_TIMEOUT=%s", took.Round(time.Millisecond), queryTimeout)
		}
	}
	a.wantVendorCalls("POST", 0)

	release()
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-lock-1")...).wantStatus(http.StatusCreated)
	a.wantVendorCalls("POST", 1)
}
