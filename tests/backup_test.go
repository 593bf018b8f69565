package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// loadAnswer is one create the write load made, and what the API answered.
type loadAnswer struct {
	key, body string
	status    int
	location  string
	resp      []byte
}

// serveRequest sends a request through the handler, from any goroutine: a
// breach of the contract is recorded for TestMain to report.
func serveRequest(e *echo.Echo, method, path, body string, headers []string) *httptest.ResponseRecorder {
	rec, err := exchange(e, method, path, body, headers)
	if err != nil {
		recordBreach(err)
	}
	return rec
}

// sqlRows reads a query's rows as column → value maps (the driver's own
// values: bytes as bytes), keyed by the column named key.
func sqlRows(t *testing.T, db *testdb.DB, key, query string, args ...any) map[string]map[string]any {
	t.Helper()
	sqlDB, err := db.Gorm.DB()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := sqlDB.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		row := map[string]any{}
		for i, c := range cols {
			row[c] = vals[i]
		}
		out[fmt.Sprint(row[key])] = row
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

// A backup taken by `licensor backup` while licenses are being created,
// restored into a fresh directory and opened under the same APP_KEY, holds
// a consistent instant: every license row and every stored answer is the
// original's byte for byte, the API shows every license as the original
// does, and every stored answer replays (decrypted under APP_KEY) exactly
// as the original answered it.
func TestBackupUnderWriteLoadRestores(t *testing.T) {
	t.Chdir(t.TempDir()) // no .env reaches the command
	ctx := context.Background()
	db := testdb.New(t, database.SQLite)
	orig := newApp(t, db)
	acme := orig.consumer("acme")

	var (
		mu       sync.Mutex
		answers  = map[string]loadAnswer{} // by Idempotency-Key
		failures []string
		created  atomic.Int64
		stop     = make(chan struct{})
		writers  sync.WaitGroup
	)
	for w := range 4 {
		writers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("backup-%d-%d", w, i)
				body := fmt.Sprintf(`{"name":"Load %d/%d","domain":"w%d-n%d.backup.test"}`, w, i, w, i)
				rec := serveRequest(orig.e, http.MethodPost, "/api/licenses", body, keyed(acme, key))
				mu.Lock()
				if rec.Code == http.StatusCreated {
					answers[key] = loadAnswer{key: key, body: body, status: rec.Code, location: rec.Header().Get("Location"), resp: rec.Body.Bytes()}
				} else {
					failures = append(failures, fmt.Sprintf("%s: %d %s", key, rec.Code, rec.Body.String()))
				}
				mu.Unlock()
				created.Add(1)
			}
		})
	}
	stopWriters := sync.OnceFunc(func() { close(stop); writers.Wait() })
	defer stopWriters()
	waitCreated := func(n int64) {
		t.Helper()
		if !testkit.Poll(60*time.Second, func() bool { return created.Load() >= n }) {
			stopWriters()
			t.Fatalf("the load made %d creates, want %d", created.Load(), n)
		}
	}

	waitCreated(20)
	file := filepath.Join(t.TempDir(), "licensor-backup.sqlite")
	vars := map[string]string{"APP_ENV": config.EnvTesting, "APP_KEY": config.EncodeKey(testKey), "DB_DATABASE": db.Config.Database}
	var stdout, stderr bytes.Buffer
	before := created.Load()
	err := console.Run(ctx, []string{"backup", file}, func(k string) string { return vars[k] }, &stdout, &stderr)
	after := created.Load()
	if err != nil {
		stopWriters()
		t.Fatalf("licensor backup: %v\n%s", err, stderr.String())
	}
	waitCreated(after + 10) // the original goes on well past the copy
	stopWriters()
	if len(failures) > 0 {
		t.Fatalf("%d creates under load did not answer 201, e.g. %s", len(failures), failures[0])
	}
	t.Logf("creates: %d before the backup, %d by its end, %d in all", before, after, len(answers))

	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("the backup is mode %o, want 600", perm)
	}

	// Restore: the copy becomes the database of a fresh storage directory.
	fresh := filepath.Join(t.TempDir(), "database.sqlite")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fresh, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	restoredCfg := config.DB{Connection: database.SQLite, Database: fresh, MaxOpenConns: 1, MaxIdleConns: 1, QueryTimeout: time.Minute}
	g, err := database.OpenMigrated(ctx, restoredCfg, nil)
	if err != nil {
		t.Fatalf("open the restored database: %v", err)
	}
	t.Cleanup(func() { database.Close(g) })
	restoredDB := &testdb.DB{Dialect: database.SQLite, Config: restoredCfg, Gorm: g}
	var check string
	if err := g.Raw("PRAGMA integrity_check").Scan(&check).Error; err != nil || check != "ok" {
		t.Fatalf("integrity_check of the restored copy: %q, %v", check, err)
	}
	restored := newApp(t, restoredDB) // the same APP_KEY as the original

	// Every license row is the original's, byte for byte; the copy is an
	// instant between the backup's start and its end.
	origLicenses := sqlRows(t, db, "id", "SELECT * FROM licenses")
	gotLicenses := sqlRows(t, restoredDB, "id", "SELECT * FROM licenses")
	if n := int64(len(gotLicenses)); n < before || n >= int64(len(origLicenses)) {
		t.Errorf("the copy holds %d licenses: want at least the %d made before the backup and fewer than the %d made in all",
			n, before, len(origLicenses))
	}
	for id, row := range gotLicenses {
		if !reflect.DeepEqual(row, origLicenses[id]) {
			t.Errorf("license %s restored as\n%v\nthe original holds\n%v", id, row, origLicenses[id])
		}
	}

	// Every stored record is the original's too, sealed as it was.
	origRecords := sqlRows(t, db, "id", "SELECT * FROM idempotency_keys")
	gotRecords := sqlRows(t, restoredDB, "id", "SELECT * FROM idempotency_keys WHERE status = ?", idempotency.StatusCompleted)
	for id, row := range gotRecords {
		if !reflect.DeepEqual(row, origRecords[id]) {
			t.Errorf("record %s restored as\n%v\nthe original holds\n%v", id, row, origRecords[id])
		}
	}
	var unsettled int64
	if err := g.Raw("SELECT COUNT(*) FROM idempotency_keys WHERE status <> ?", idempotency.StatusCompleted).Scan(&unsettled).Error; err != nil {
		t.Fatal(err)
	}
	if unsettled > 4 { // at most the writers' creates in flight at the instant
		t.Errorf("%d unsettled records in the copy, want at most one per writer", unsettled)
	}

	// The API shows each restored license exactly as the original does.
	licensed := map[string]bool{}
	for _, a := range answers {
		licensed[strings.TrimPrefix(a.location, "/api/licenses/")] = true
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range gotLicenses {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		if !licensed[id] {
			t.Errorf("the copy holds license %s, which no create answered", id)
		}
		want := serveRequest(orig.e, http.MethodGet, "/api/licenses/"+id, "", acme)
		got := serveRequest(restored.e, http.MethodGet, "/api/licenses/"+id, "", acme)
		if got.Code != http.StatusOK || want.Code != http.StatusOK || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Errorf("GET license %s: restored %d %s; original %d %s", id, got.Code, got.Body.String(), want.Code, want.Body.String())
		}
	}

	// Every stored answer replays, decrypted, byte for byte as first sent.
	replayed := 0
	for _, row := range gotRecords {
		key := fmt.Sprint(row["idempotency_key"])
		a, ok := answers[key]
		if !ok {
			t.Errorf("the copy holds a completed record for key %q, which the load never sent", key)
			continue
		}
		if body, _ := row["response_body"].([]byte); len(body) == 0 || bytes.Contains(body, []byte("license_key")) {
			t.Errorf("record %v: response_body is not sealed at rest: %q", row["id"], body)
		}
		r := serveRequest(restored.e, http.MethodPost, "/api/licenses", a.body, keyed(acme, key))
		if r.Code != a.status || r.Header().Get("Idempotent-Replayed") != "true" || r.Header().Get("Location") != a.location ||
			!bytes.Equal(r.Body.Bytes(), a.resp) {
			t.Errorf("replay of %s on the copy: %d replayed=%q %s\nthe original answered %d %s",
				key, r.Code, r.Header().Get("Idempotent-Replayed"), r.Body.String(), a.status, a.resp)
		}
		replayed++
	}
	if int64(replayed) < before {
		t.Errorf("%d answers replayed from the copy, want at least the %d made before the backup", replayed, before)
	}
	t.Logf("the copy: %d licenses, %d stored answers replayed, %d unsettled records", len(gotLicenses), replayed, unsettled)
}
