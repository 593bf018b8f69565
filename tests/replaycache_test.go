package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The replay cache (IDEMPOTENCY_REPLAY_CACHE) answers a replay from this
// replica's memory, reading only the token row. These tests hold it to
// what a replay from the database answers: never another consumer's
// record, never an expired one, never one another replica has replaced
// since, never for a revoked token.

// withReplayCache sets the cache's size.
func withReplayCache(n int) option {
	return withConfig(func(c *config.Config) { c.Idempotency.ReplayCache = n })
}

// keyedCreate is POST /api/licenses with the key, as token.
func (a *app) keyedCreate(token, key, body string) *response {
	a.t.Helper()
	return a.do(http.MethodPost, "/api/licenses", body, append(bearer(token), "Idempotency-Key", key)...)
}

// wantReplayOf checks that r is first's answer, replayed byte for byte.
func wantReplayOf(t *testing.T, r, first *response) {
	t.Helper()
	if r.Code != first.Code || r.Header().Get("Idempotent-Replayed") != "true" || r.Body.String() != first.Body.String() {
		t.Fatalf("replay = %d replayed=%q %s\nwant the stored %d %s", r.Code, r.Header().Get("Idempotent-Replayed"), r.Body.String(),
			first.Code, first.Body.String())
	}
}

func TestReplayCacheAnswersARepeatFromMemory(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(16))
		tok := a.token("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(tok, "order-1", body).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first) // from the database, then kept
		if n := a.app.Guard.CachedReplays(); n != 0 {
			t.Fatalf("%d replays from the cache before any was kept", n)
		}
		for i := range 3 {
			wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first)
			if n := a.app.Guard.CachedReplays(); n != int64(i+1) {
				t.Fatalf("after %d more replays, %d came from the cache", i+1, n)
			}
		}
		// Another body under the key is refused as ever: a hit replays the
		// same bytes only.
		a.keyedCreate(tok, "order-1", `{"name":"Other","domain":"acme.test"}`).wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		if got := a.vendor.siteCount(); got != 1 {
			t.Errorf("the vendor holds %d sites, want 1", got)
		}
	})
}

func TestReplayCacheOff(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(0))
		tok := a.token("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(tok, "order-1", body).wantStatus(http.StatusCreated)
		for range 3 {
			wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first)
		}
		if n := a.app.Guard.CachedReplays(); n != 0 {
			t.Fatalf("%d replays from a cache of size 0", n)
		}
	})
}

// A consumer's kept answer is never another's: the same key and the same
// bytes from another consumer are that consumer's request (here refused,
// its key being bound to another body), and each consumer replays its own
// answer.
func TestReplayCacheNeverAnswersForAnotherConsumer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(16))
		alpha, beta := a.token("alpha", "licenses:write"), a.token("beta", "licenses:write")
		shop := `{"name":"Shop","domain":"shop.test"}`
		firstA := a.keyedCreate(alpha, "order-1", shop).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(alpha, "order-1", shop), firstA)
		wantReplayOf(t, a.keyedCreate(alpha, "order-1", shop), firstA)
		if a.app.Guard.CachedReplays() != 1 {
			t.Fatal("alpha's answer was not kept")
		}
		other := `{"name":"Other","domain":"other.test"}`
		firstB := a.keyedCreate(beta, "order-1", other).wantStatus(http.StatusCreated)
		// alpha's very bytes under beta's key: beta's record decides.
		a.keyedCreate(beta, "order-1", shop).wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		for range 3 {
			wantReplayOf(t, a.keyedCreate(alpha, "order-1", shop), firstA)
			wantReplayOf(t, a.keyedCreate(beta, "order-1", other), firstB)
		}
		if n := a.app.Guard.CachedReplays(); n < 6 {
			t.Fatalf("%d replays from the cache, want both consumers' kept", n)
		}
	})
}

// After the record's expiry a hit is no hit: the key runs as a new intent,
// even with the body the cache holds the answer of; and in the seconds
// before it, the database answers.
func TestReplayCacheHonoursExpiry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		a := newApp(t, db, withClock(clk), withReplayCache(16))
		tok := a.token("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(tok, "order-1", body).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first)
		wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first)
		hits := a.app.Guard.CachedReplays()
		if hits != 1 {
			t.Fatalf("%d replays from the cache, want 1 before expiry", hits)
		}
		// Seconds before the expiry the database answers, not the cache:
		// another replica whose clock runs ahead may be taking the key over.
		clk.Advance(time.Hour - 2*time.Second)
		wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first)
		if n := a.app.Guard.CachedReplays(); n != hits {
			t.Fatalf("2 s before expiry a replay came from the cache (%d, want %d)", n, hits)
		}
		clk.Advance(2 * time.Second) // IDEMPOTENCY_TTL (an hour here): the record is expired, the token is not
		again := a.keyedCreate(tok, "order-1", body)
		if again.Code/100 != 2 || again.Header().Get("Idempotent-Replayed") == "true" {
			t.Fatalf("after expiry the key was replayed: %d %s", again.Code, again.Body.String())
		}
		if n := a.app.Guard.CachedReplays(); n != hits {
			t.Fatalf("after expiry %d replays came from the cache, want still %d", n, hits)
		}
	})
}

// Replica A keeps an answer; the record expires and replica B runs the key
// again with another body (a take-over: a new intent). A must then answer
// as the database says (B's answer for B's body, and the key bound to it),
// never from its old copy.
func TestReplayCacheNeverServesARecordAnotherReplicaReplaced(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		ra := newApp(t, db, withClock(clk), withReplayCache(16))
		rb := newApp(t, db, withClock(clk), withReplayCache(16))
		tok := ra.token("acme", "licenses:write")
		old := `{"name":"Acme","domain":"acme.test"}`
		first := ra.keyedCreate(tok, "order-1", old).wantStatus(http.StatusCreated)
		wantReplayOf(t, ra.keyedCreate(tok, "order-1", old), first)
		wantReplayOf(t, ra.keyedCreate(tok, "order-1", old), first)
		if ra.app.Guard.CachedReplays() != 1 {
			t.Fatal("replica A did not keep the answer")
		}
		clk.Advance(time.Hour) // IDEMPOTENCY_TTL here: the record is expired, the token is not
		renamed := `{"name":"Acme Two","domain":"acme2.test"}`
		second := rb.keyedCreate(tok, "order-1", renamed).wantStatus(http.StatusCreated)
		wantReplayOf(t, ra.keyedCreate(tok, "order-1", renamed), second)
		ra.keyedCreate(tok, "order-1", old).wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
}

// The token row is read on every request: a revoked token is refused at
// once, whatever the cache holds for it.
func TestReplayCacheNeverAnswersARevokedToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(16))
		issued := a.issued("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(issued.Secret, "order-1", body).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(issued.Secret, "order-1", body), first)
		wantReplayOf(t, a.keyedCreate(issued.Secret, "order-1", body), first)
		if a.app.Guard.CachedReplays() != 1 {
			t.Fatal("the answer was not kept")
		}
		if err := a.auth.Revoke(context.Background(), audit.Console(), issued.ID); err != nil {
			t.Fatal(err)
		}
		a.keyedCreate(issued.Secret, "order-1", body).wantStatus(http.StatusUnauthorized)
	})
}

// Concurrent replays share the cached record: each gets the first answer
// whole (run under -race in CI).
func TestReplayCacheConcurrentHits(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(16))
		tok := a.token("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(tok, "order-1", body).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(tok, "order-1", body), first) // kept
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 20 {
					r := a.keyedCreate(tok, "order-1", body)
					if r.Code != first.Code || r.Body.String() != first.Body.String() || r.Header().Get("Idempotent-Replayed") != "true" {
						t.Errorf("concurrent replay = %d %s", r.Code, r.Body.String())
						return
					}
				}
			})
		}
		wg.Wait()
		if n := a.app.Guard.CachedReplays(); n != 160 {
			t.Errorf("%d of 160 concurrent replays came from the cache", n)
		}
	})
}

// The cache is one LRU for all of a replica's consumers: one that replays
// many keys pushes the others' records out, and their replays then read
// the record from the database, as with the cache off. Never a wrong
// answer, and the pushed-out record is kept again at its next replay.
func TestReplayCacheFloodedByAnotherConsumer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withReplayCache(4))
		acme := a.token("acme", "licenses:write")
		body := `{"name":"Acme","domain":"acme.test"}`
		first := a.keyedCreate(acme, "order-1", body).wantStatus(http.StatusCreated)
		wantReplayOf(t, a.keyedCreate(acme, "order-1", body), first) // kept
		hostile := a.token("globex", "licenses:write")
		for i := range 8 {
			b := fmt.Sprintf(`{"name":"Globex","domain":"g%d.test"}`, i)
			key := fmt.Sprintf("flood-%d", i)
			a.keyedCreate(hostile, key, b).wantStatus(http.StatusCreated)
			a.keyedCreate(hostile, key, b) // kept, pushing the oldest out
		}
		hits := a.app.Guard.CachedReplays()
		wantReplayOf(t, a.keyedCreate(acme, "order-1", body), first)
		if n := a.app.Guard.CachedReplays(); n != hits {
			t.Fatalf("acme's record was still cached after the flood (%d hits, want %d)", n, hits)
		}
		wantReplayOf(t, a.keyedCreate(acme, "order-1", body), first)
		if n := a.app.Guard.CachedReplays(); n != hits+1 {
			t.Fatalf("acme's record was not kept again (%d hits, want %d)", n, hits+1)
		}
	})
}
