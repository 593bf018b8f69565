package tests

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

func TestHealthAndReadiness(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		if got := a.do(http.MethodGet, "/healthz", "").wantStatus(http.StatusOK).json()["status"]; got != "ok" {
			t.Errorf("healthz status = %v", got)
		}
		a.do(http.MethodGet, "/readyz", "").wantStatus(http.StatusOK)

		sqlDB, err := db.Gorm.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.Close() // the database goes away
		r := a.do(http.MethodGet, "/readyz", "")
		r.wantError(http.StatusServiceUnavailable, "database_unavailable")
		if strings.Contains(strings.ToLower(r.Body.String()), "sql") {
			t.Errorf("readiness leaks internals: %s", r.Body.String())
		}
		a.do(http.MethodGet, "/healthz", "").wantStatus(http.StatusOK) // alive, though not ready
	})
}

func TestErrorsAreJSON(t *testing.T) {
	a := newApp(t, testdb.New(t, database.SQLite))
	a.e.GET("/boom", func(echo.Context) error { panic("secret internal detail") })

	a.do(http.MethodGet, "/no/such/route", "").wantError(http.StatusNotFound, "")
	a.do(http.MethodDelete, "/healthz", "").wantError(http.StatusMethodNotAllowed, "")
	r := a.do(http.MethodGet, "/boom", "")
	r.wantError(http.StatusInternalServerError, "")
	if strings.Contains(r.Body.String(), "secret") || strings.Contains(r.Body.String(), "goroutine") {
		t.Errorf("500 leaks the panic: %s", r.Body.String())
	}
}

func TestRequestID(t *testing.T) {
	a := newApp(t, testdb.New(t, database.SQLite))
	if got := a.do(http.MethodGet, "/healthz", "", "X-Request-Id", "abc-123").Header().Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("sane id not kept: got %q", got)
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "new\x01line"} {
		got := a.do(http.MethodGet, "/healthz", "", "X-Request-Id", bad).Header().Get("X-Request-Id")
		if got == bad || len(got) != 26 {
			t.Errorf("id %q: got %q, want a fresh ULID", bad, got)
		}
	}
	if got := a.do(http.MethodGet, "/no/such", "").Header().Get("X-Request-Id"); got == "" {
		t.Error("404 has no X-Request-Id")
	}
}

func TestMigrationsUpDownUp(t *testing.T) {
	for _, dialect := range []string{database.SQLite, database.MySQL} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db := testdb.Empty(t, dialect)
			m, err := database.NewMigrator(db.Gorm)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.CheckCurrent(ctx); err != database.ErrSchemaBehind {
				t.Fatalf("CheckCurrent on an empty database = %v, want ErrSchemaBehind", err)
			}
			tables := []string{"consumers", "personal_access_tokens", "licenses", "idempotency_keys", "license_events", "readiness_probes", "rate_limits", "audit_events"}
			migrations := migrationFiles(t, "../database/migrations/"+dialect)
			if n, err := m.Up(ctx); err != nil || n != migrations {
				t.Fatalf("Up = %d, %v; want %d applied", n, err, migrations)
			}
			wantTables(t, db, tables, true)
			if err := m.CheckCurrent(ctx); err != nil {
				t.Fatalf("CheckCurrent after Up = %v", err)
			}
			for range migrations {
				if _, err := m.Down(ctx); err != nil {
					t.Fatalf("Down: %v", err)
				}
			}
			wantTables(t, db, tables, false)
			if v, err := m.Down(ctx); err != nil || v != 0 {
				t.Fatalf("Down with nothing applied = %d, %v; want 0, nil", v, err)
			}
			if n, err := m.Up(ctx); err != nil || n != migrations {
				t.Fatalf("second Up = %d, %v", n, err)
			}
			wantTables(t, db, tables, true)
			st, err := m.Status(ctx)
			if err != nil || len(st) != migrations || !st[migrations-1].Applied {
				t.Fatalf("Status = %+v, %v", st, err)
			}
		})
	}
}

func TestIdempotencyScopeIsUniqueAndCaseSensitive(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		insert := func(consumer, key string) error {
			return db.Gorm.Exec(`INSERT INTO idempotency_keys
				(consumer_id, operation, idempotency_key, request_hash, status, created_at, updated_at, expires_at)
				VALUES (?, 'licenses.store', ?, 'h', 'processing', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
				consumer, key).Error
		}
		if err := insert("c1", "abc"); err != nil {
			t.Fatal(err)
		}
		if err := insert("c1", "abc"); err == nil {
			t.Error("duplicate (consumer, operation, key) was accepted")
		}
		if err := insert("c1", "ABC"); err != nil {
			t.Errorf("keys differing in case collide: %v", err)
		}
		if err := insert("c2", "abc"); err != nil {
			t.Errorf("the same key of another consumer collides: %v", err)
		}
	})
}

func wantTables(t *testing.T, db *testdb.DB, tables []string, exist bool) {
	t.Helper()
	for _, name := range tables {
		if got := db.Gorm.Migrator().HasTable(name); got != exist {
			t.Errorf("table %s exists = %v, want %v", name, got, exist)
		}
	}
}

// migrationFiles counts the migrations embedded for a dialect, so that a
// new migration changes no test.
func migrationFiles(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s: %v", dir, err)
	}
	return len(files)
}
