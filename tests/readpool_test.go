package tests

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// On SQLite the hot reads have a pool of their own: while a write
// transaction holds the one writing connection, a token check, a show, a
// list and a replay still answer at once (before the read pool they queued
// behind it until DB_QUERY_TIMEOUT).
func TestReadsDoNotQueueBehindTheWriter(t *testing.T) {
	a := newApp(t, testdb.New(t, database.SQLite))
	acme := a.consumer("acme")
	lic := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-1")...).wantStatus(http.StatusCreated).licenseData()

	tx := a.db.Gorm.Begin() // BEGIN IMMEDIATE: the write lock and the only writing connection
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	defer tx.Rollback()
	if err := tx.Exec("UPDATE licenses SET name = name WHERE id = ?", lic["id"]).Error; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.do(http.MethodGet, "/api/licenses/"+lic["id"].(string), "", acme...).wantStatus(http.StatusOK)
	a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK)
	r := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-1")...).wantStatus(http.StatusCreated)
	if r.Header().Get("Idempotent-Replayed") != "true" {
		t.Error("the retry was not a replay")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the reads took %v beside an open write transaction", d)
	}
}

// The read pool cannot write: a write sent to it by mistake fails instead
// of taking the write lock beside the writer.
func TestTheReadPoolCannotWrite(t *testing.T) {
	db := testdb.New(t, database.SQLite)
	if db.Read == db.Gorm {
		t.Fatal("SQLite has no read pool of its own")
	}
	err := db.Read.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('x', 'x', ?, ?)", time.Now(), time.Now()).Error
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "readonly") {
		t.Errorf("a write on the read pool: %v, want a read-only error", err)
	}
}

// Revocation is immediate although reads have a pool of their own and the
// token's signature check is cached: under load, the very next request of a
// revoked token is 401, on both databases.
func TestRevocationIsImmediateUnderLoad(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		victim := a.token("acme", auth.LicensesRead, auth.LicensesWrite)
		other := a.consumer("globex")
		admin := bearer(a.token("ops", auth.TokensManage))
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, bearer(victim)...).wantStatus(http.StatusCreated).licenseData()
		path := "/api/licenses/" + lic["id"].(string)

		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 4 { // load: the victim's reads and another consumer's, on every connection
			wg.Go(func() {
				for ctx.Err() == nil {
					a.do(http.MethodGet, path, "", bearer(victim)...)
					a.do(http.MethodGet, "/api/licenses", "", other...)
				}
			})
		}
		for range 20 { // the cache and the pools are warm
			a.do(http.MethodGet, path, "", bearer(victim)...).wantStatus(http.StatusOK)
		}
		var tokenID string
		for _, tok := range a.do(http.MethodGet, "/api/tokens?consumer=acme", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any) {
			tokenID = tok.(map[string]any)["id"].(string)
		}
		a.do(http.MethodDelete, "/api/tokens/"+tokenID, "", admin...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, path, "", bearer(victim)...).wantStatus(http.StatusUnauthorized)
		stop()
		wg.Wait()
	})
}
