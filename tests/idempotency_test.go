package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

const acmeBody = `{"name":"Acme","domain":"acme.test"}`

// keyed returns the consumer's headers plus an Idempotency-Key.
func keyed(token []string, key string) []string {
	return append(append([]string{}, token...), "Idempotency-Key", key)
}

// record reads the consumer's record of a key; nil when there is none.
func (a *app) record(key string) *idempotency.Record {
	a.t.Helper()
	var recs []idempotency.Record
	if err := a.db.Gorm.Where("idempotency_key = ?", key).Find(&recs).Error; err != nil {
		a.t.Fatal(err)
	}
	if len(recs) == 0 {
		return nil
	}
	return &recs[0]
}

// 1. Two requests with one key create one license; the second is a replay.
func TestIdempotencyCreatesOneLicenseForTwoRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.vendor.script("GET", reply{status: 200, body: `{"data":[]}`})
		a.vendor.script("POST", reply{status: 201, body: `{"data":{"id":"site_9","name":"Acme","domain":"acme.test","license_key":"LK-9","status":"active"}}`})
		acme := keyed(a.consumer("acme"), "order-1001")

		first := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if first.Header().Get("Idempotent-Replayed") != "" {
			t.Error("the first answer is marked replayed")
		}
		a.wantVendorCalls("", 2)
		second := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if second.Header().Get("Idempotent-Replayed") != "true" {
			t.Error("the second answer is not marked Idempotent-Replayed: true")
		}
		if second.Body.String() != first.Body.String() {
			t.Errorf("replayed body differs:\n first %s\nsecond %s", first.Body.String(), second.Body.String())
		}
		for _, h := range []string{"Location", "Content-Type"} {
			if second.Header().Get(h) != first.Header().Get(h) {
				t.Errorf("%s = %q, want %q", h, second.Header().Get(h), first.Header().Get(h))
			}
		}
		a.wantVendorCalls("", 2) // both during the first request
		if n := a.licenseRows(); n != 1 {
			t.Errorf("%d license rows, want 1", n)
		}
		rec := a.record("order-1001")
		if rec == nil || rec.Status != idempotency.StatusCompleted || rec.ResourceType == nil || *rec.ResourceType != "license" ||
			rec.ExternalRef == nil || *rec.ExternalRef != "site_9" || rec.LockedUntil != nil {
			t.Errorf("record = %+v", rec)
		}
	})
}

// 2. The same key with another body is refused, and nothing reaches the vendor.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1002")
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		calls := a.vendor.count("")
		a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"other.test"}`, acme...).
			wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		a.wantVendorCalls("", calls)
	})
}

// 3. A failed attempt of a valid request keeps its fingerprint, and
// nothing else, until IDEMPOTENCY_TTL: the same key with another request is
// 422 idempotency_key_reused without reaching the vendor; the same request
// runs again for real (the failure is not replayed); the reconciler never
// resumes it. A request refused by validation keeps nothing.
func TestIdempotencyFailedAttemptKeepsItsFingerprint(t *testing.T) {
	const otherBody = `{"name":"Acme","domain":"other.test"}`
	for _, tt := range []struct {
		name   string
		fail   func(a *app)
		status int
		code   string
		rerun  int // the retry's answer with the same body
	}{
		{name: "vendor unavailable", fail: func(a *app) { a.vendor.script("GET", reply{status: 503, body: `{}`}) },
			status: http.StatusServiceUnavailable, code: "vendor_unavailable", rerun: http.StatusCreated},
		{name: "vendor rejected", fail: func(a *app) { a.vendor.script("POST", reply{status: 422, body: `{"message":"no"}`}) },
			status: http.StatusUnprocessableEntity, code: "vendor_rejected", rerun: http.StatusCreated},
		{name: "domain taken", fail: func(a *app) {
			a.do(http.MethodPost, "/api/licenses", acmeBody, a.consumer("globex")...).wantStatus(http.StatusCreated)
		}, status: http.StatusConflict, code: "domain_taken", rerun: http.StatusConflict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				clk := testkit.NewClock(time.Now())
				a := newApp(t, db, withClock(clk))
				acme := keyed(a.consumer("acme"), "order-1003")
				tt.fail(a)
				a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(tt.status, tt.code)
				rec := a.record("order-1003")
				if rec == nil || rec.Status != "abandoned" || rec.ResponseStatus != nil || len(rec.ResponseBody) != 0 {
					t.Fatalf("after the failure the record is %+v, want it abandoned with no response stored", rec)
				}
				calls := a.vendor.count("")
				a.do(http.MethodPost, "/api/licenses", otherBody, acme...).wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
				a.wantVendorCalls("", calls)

				clk.Advance(3 * time.Minute) // past two leases: the reconciler would take up a dead owner's intent
				if got := results(a.reconcileOnce(a.reconciler())); got != "" {
					t.Errorf("the reconciler resumed a failed attempt: %q", got)
				}
				a.wantVendorCalls("", calls)

				r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(tt.rerun)
				if r.Header().Get("Idempotent-Replayed") != "" {
					t.Error("the retry was a replay, not a real execution")
				}
				if tt.rerun == http.StatusCreated && a.vendor.count("") <= calls {
					t.Error("the retry did not reach the vendor again")
				}
				if rec := a.record("order-1003"); rec == nil || rec.Attempts != 2 {
					t.Errorf("record after the retry = %+v, want the same intent, attempt 2", rec)
				}
			})
		})
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Run("validation error keeps nothing", func(t *testing.T) {
			a := newApp(t, db)
			acme := keyed(a.consumer("acme"), "order-1004")
			a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"http://bad"}`, acme...).wantError(http.StatusUnprocessableEntity, "")
			if rec := a.record("order-1004"); rec != nil {
				t.Fatalf("a refused request left a record: %+v", rec)
			}
			a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"fixed.test"}`, acme...).wantStatus(http.StatusCreated)
		})
		t.Run("after IDEMPOTENCY_TTL the key is free, and the pruner deletes it", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			acme := a.consumer("acme")
			for _, key := range []string{"order-1005", "order-1006"} {
				a.vendor.script("GET", reply{status: 503, body: `{}`})
				a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, key)...).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
			}
			clk.Advance(time.Hour) // the harness's IDEMPOTENCY_TTL
			r := a.do(http.MethodPost, "/api/licenses", otherBody, keyed(acme, "order-1005")...).wantStatus(http.StatusCreated)
			if r.licenseData()["domain"] != "other.test" {
				t.Errorf("expired key: %s, want a new execution of the other request", r.Body.String())
			}
			if n, _, err := a.app.Pruner.RunOnce(context.Background()); err != nil || n < 1 || a.record("order-1006") != nil {
				t.Errorf("prune = %d, %v; record %+v; want the expired failed attempt deleted", n, err, a.record("order-1006"))
			}
		})
		t.Run("two retries at once: one runs, the other is 409 request_in_progress", func(t *testing.T) {
			a := newApp(t, db)
			acme := keyed(a.consumer("acme"), "order-1007")
			a.vendor.script("GET", reply{status: 503, body: `{}`})
			a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
			release, entered := make(chan struct{}), make(chan struct{})
			a.vendor.script("POST", reply{hold: release, entered: entered})
			done := make(chan *response)
			go func() { done <- a.do(http.MethodPost, "/api/licenses", acmeBody, acme...) }()
			<-entered
			a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusConflict, "request_in_progress")
			close(release)
			(<-done).wantStatus(http.StatusCreated)
			a.wantVendorCalls("POST", 1)
		})
	})
}

func TestIdempotencyKeyIsScopedPerConsumer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		first := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(a.consumer("acme"), "shared-key")...).wantStatus(http.StatusCreated)
		b := a.do(http.MethodPost, "/api/licenses", `{"name":"Globex","domain":"globex.test"}`, keyed(a.consumer("globex"), "shared-key")...)
		b.wantStatus(http.StatusCreated)
		if b.Header().Get("Idempotent-Replayed") != "" || b.licenseData()["domain"] != "globex.test" {
			t.Errorf("globex got %s (replayed %q), want its own license", b.Body.String(), b.Header().Get("Idempotent-Replayed"))
		}
		if b.licenseData()["id"] == first.licenseData()["id"] {
			t.Error("globex saw acme's license")
		}
	})
}

// A retry's record is read with its token row, yet answered only for a live
// token: with the token revoked the retry is a 401 that shows nothing of the
// record, and the same key with a live token of the consumer still replays.
func TestIdempotencyReplayNeedsALiveToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ctx := context.Background()
		acme := keyed(a.consumer("acme"), "order-rev")
		first := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		toks, err := a.auth.List(ctx, "acme")
		if err != nil || len(toks) != 1 {
			t.Fatal(toks, err)
		}
		if err := a.auth.Revoke(ctx, audit.Console(), toks[0].ID); err != nil {
			t.Fatal(err)
		}
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusUnauthorized)
		if id := first.licenseData()["id"].(string); strings.Contains(r.Body.String(), id) || r.Header().Get("Idempotent-Replayed") != "" {
			t.Errorf("a revoked token's retry answered %s (replayed %q)", r.Body, r.Header().Get("Idempotent-Replayed"))
		}
		again := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(a.consumer("acme"), "order-rev")...).wantStatus(http.StatusCreated)
		if again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
			t.Errorf("a live token's retry: replayed %q, %s", again.Header().Get("Idempotent-Replayed"), again.Body)
		}
		a.wantVendorCalls("", 2) // the first execution's list and create; no retry reached the vendor
	})
}

func TestIdempotencyReorderedKeysAreOneRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1006")
		first := a.do(http.MethodPost, "/api/licenses", `{"domain":"a.test","name":"A"}`, acme...).wantStatus(http.StatusCreated)
		for _, body := range []string{`{ "name": "A", "domain": "a.test" }`, `{"name":"A","domain":"A.TEST.","meta":{"sent_at":"10:01"}}`} {
			r := a.do(http.MethodPost, "/api/licenses", body, acme...).wantStatus(http.StatusCreated)
			if r.Header().Get("Idempotent-Replayed") != "true" || r.Body.String() != first.Body.String() {
				t.Errorf("%s: not replayed as the same request", body)
			}
		}
	})
}

func TestIdempotencyKeyValidation(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	token := a.consumer("acme")
	for name, headers := range map[string][]string{
		"empty":     {"Idempotency-Key", ""},
		"too long":  {"Idempotency-Key", strings.Repeat("k", 256)},
		"space":     {"Idempotency-Key", "a key"},
		"non-ascii": {"Idempotency-Key", "clé"},
		"twice":     {"Idempotency-Key", "a", "Idempotency-Key", "b"},
	} {
		t.Run(name, func(t *testing.T) {
			a.do(http.MethodPost, "/api/licenses", acmeBody, append(append([]string{}, token...), headers...)...).
				wantError(http.StatusBadRequest, "idempotency_key_invalid")
		})
	}
	a.wantVendorCalls("", 0)
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(token, strings.Repeat("k", 255))...).wantStatus(http.StatusCreated)
}

func TestIdempotencyHeldCallAnswers409AtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1007")
		release, entered := make(chan struct{}), make(chan struct{})
		a.vendor.script("POST", reply{hold: release, entered: entered})
		done := make(chan *response)
		go func() { done <- a.do(http.MethodPost, "/api/licenses", acmeBody, acme...) }()
		<-entered

		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...) // while the vendor holds the create
		r.wantError(http.StatusConflict, "request_in_progress")
		if r.Header().Get("Retry-After") != "1" {
			t.Errorf("Retry-After = %q, want 1", r.Header().Get("Retry-After"))
		}
		close(release)
		(<-done).wantStatus(http.StatusCreated)
		a.wantVendorCalls("POST", 1)
	})
}

// Fifty clients send one key at once: one create, one row, and every client
// ends up holding the same body.
func TestIdempotencyFiftyConcurrentRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1008")
		start := make(chan struct{})
		bodies := make([]string, 50)
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for i := range bodies {
			wg.Go(func() {
				<-start
				r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...)
				mu.Lock()
				codes[r.Code]++
				mu.Unlock()
				for deadline := time.Now().Add(20 * time.Second); r.Code == http.StatusConflict && time.Now().Before(deadline); {
					if m := r.json(); m["code"] != "request_in_progress" {
						t.Errorf("409 with code %v", m["code"])
						return
					}
					r = a.do(http.MethodPost, "/api/licenses", acmeBody, acme...)
				}
				if r.Code != http.StatusCreated {
					t.Errorf("final status %d: %s", r.Code, r.Body.String())
				}
				bodies[i] = r.Body.String()
			})
		}
		close(start)
		wg.Wait()
		t.Logf("first answers: %v", codes)
		if codes[http.StatusCreated]+codes[http.StatusConflict] != 50 || codes[http.StatusCreated] < 1 {
			t.Errorf("answers %v, want only 201 and 409", codes)
		}
		a.wantVendorCalls("POST", 1)
		if n := a.licenseRows(); n != 1 {
			t.Errorf("%d license rows, want 1", n)
		}
		for i, b := range bodies {
			if b != bodies[0] {
				t.Fatalf("client %d holds %s, client 0 holds %s", i, b, bodies[0])
			}
		}
	})
}

func TestIdempotencyClientHangUpThenRetryReplays(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1009")
		release, entered := make(chan struct{}), make(chan struct{})
		a.vendor.script("POST", reply{hold: release, entered: entered})

		ctx, hangUp := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/licenses", strings.NewReader(acmeBody))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i < len(acme); i += 2 {
			req.Header.Set(acme[i], acme[i+1])
		}
		done := make(chan struct{})
		go func() { a.e.ServeHTTP(httptest.NewRecorder(), req); close(done) }()
		<-entered
		hangUp()
		close(release)
		<-done

		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retry after a hang-up was not a replay: %s", r.Body.String())
		}
		a.wantVendorCalls("POST", 1)
	})
}

// A process died after the vendor created the site and before it settled:
// its record is processing with a lapsed lease. The retry takes it over and
// converges on the same site.
func TestIdempotencyExpiredLeaseIsTakenOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1010")
		site := a.vendor.addSite("Acme", "acme.test") // the dead owner's create went through
		a.vendor.script("POST", reply{hold: make(chan struct{})})
		a.plantRecord("acme", "order-1010", acmeBody, "processing", -time.Second)

		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if r.licenseData()["vendor_site_id"] != site.ID {
			t.Errorf("license on %v, want the existing %s", r.licenseData()["vendor_site_id"], site.ID)
		}
		a.wantVendorCalls("POST", 0)
		if a.vendor.siteCount() != 1 {
			t.Errorf("vendor holds %d sites", a.vendor.siteCount())
		}
		if rec := a.record("order-1010"); rec.Attempts != 2 || rec.Status != idempotency.StatusCompleted {
			t.Errorf("record after take-over: status %s attempts %d", rec.Status, rec.Attempts)
		}
	})
}

func TestIdempotencyLiveLeaseIsNotTakenOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1011")
		a.plantRecord("acme", "order-1011", acmeBody, "processing", time.Minute)
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusConflict, "request_in_progress")
		a.wantVendorCalls("", 0)
	})
}

func TestIdempotencyRecordPastTTLRunsAsNew(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1012")
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		past := time.Now().Add(-time.Second).UTC()
		if err := a.db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", "order-1012").Update("expires_at", past).Error; err != nil {
			t.Fatal(err)
		}
		r := a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"other.test"}`, acme...)
		r.wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "" || r.licenseData()["domain"] != "other.test" {
			t.Errorf("expired key: %s, want a new execution", r.Body.String())
		}
		if rec := a.record("order-1012"); !rec.ExpiresAt.After(time.Now()) {
			t.Errorf("the taken-over record still expires at %v", rec.ExpiresAt)
		}
	})
}

func TestIdempotencyPendingIsKeptAndNotResent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-1013")
		a.vendor.script("POST", reply{status: 502, body: `bad gateway`, commit: true})
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")
		rec := a.record("order-1013")
		if rec == nil || rec.Status != idempotency.StatusPending || rec.ExternalRef == nil || *rec.ExternalRef != "acme.test" {
			t.Fatalf("record = %+v, want pending with the domain as its reference", rec)
		}
		calls := a.vendor.count("")
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...)
		r.wantError(http.StatusAccepted, "operation_pending")
		if r.Header().Get("Retry-After") == "" {
			t.Error("202 without Retry-After")
		}
		a.wantVendorCalls("", calls)
	})
}

func TestIdempotencyLogsDigestNeverKey(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	token := a.consumer("acme")
	key := "very-secret-idempotency-key-42"
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(token, key)...).wantStatus(http.StatusCreated)
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(token, key)...).wantStatus(http.StatusCreated)
	logs := a.logs.String()
	// One line per request: the access line carries the idempotency outcome.
	if n := strings.Count(logs, `"msg":"request"`); n != 2 {
		t.Errorf("%d request log lines for 2 requests, want one each:\n%s", n, logs)
	}
	if n := strings.Count(logs, `"idempotency":{"consumer_id":`); n != 2 {
		t.Errorf("%d request lines carry the idempotency outcome, want both:\n%s", n, logs)
	}
	if strings.Contains(logs, `"msg":"idempotency"`) {
		t.Errorf("a second line for the idempotency outcome:\n%s", logs)
	}
	if strings.Contains(logs, key) {
		t.Error("the raw key reached the log")
	}
	for _, want := range []string{`"outcome":"executed"`, `"outcome":"replayed"`, `"key_digest":"` + a.store.KeyDigest(key) + `"`, `"vendor_ref":"site_1"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	for _, secret := range []string{strings.TrimPrefix(token[1], "Bearer "), "vendor-secret-token", "LK-"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log holds a secret %q", secret[:min(len(secret), 12)])
		}
	}
}

func TestIdempotencyRequired(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withConfig(func(c *config.Config) { c.Idempotency.Required = true }))
	a.do(http.MethodPost, "/api/licenses", acmeBody, a.consumer("acme")...).wantError(http.StatusBadRequest, "idempotency_key_missing")
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(a.consumer("acme"), "k-1")...).wantStatus(http.StatusCreated)
}

// plantRecord writes a record as a crashed or busy owner would have left it.
func (a *app) plantRecord(consumer, key, body, status string, leaseFromNow time.Duration) {
	a.t.Helper()
	var consumerID string
	a.db.Gorm.Raw("SELECT id FROM consumers WHERE name = ?", consumer).Scan(&consumerID)
	now := dbtime.Now()
	lease := now.Add(leaseFromNow)
	rec := idempotency.Record{
		ConsumerID: consumerID, Operation: "licenses.store", Key: key,
		RequestHash: jsonCreateFingerprint, // acme.test's create: a retry of it with acmeBody is the same intent
		RequestBody: []byte(body), Status: status, LockedUntil: &lease, Attempts: 1,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if err := a.db.Gorm.Create(&rec).Error; err != nil {
		a.t.Fatal(err)
	}
}

// The auto: prefix is the server's: a client's Idempotency-Key that starts
// with it is refused (400 idempotency_key_invalid), nothing recorded, so no
// client intent is ever shown as a keyless one.
func TestAutoPrefixIsReservedForTheServer(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	acme := a.consumer("acme")
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "auto:req-1")...).wantError(http.StatusBadRequest, "idempotency_key_invalid")
	if rec := a.record("auto:req-1"); rec != nil {
		t.Errorf("a client's auto: key was recorded: %s", rec.Status)
	}
	a.wantVendorCalls("GET", 0)
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "autos:1")...).wantStatus(http.StatusCreated)
}

// The access line of every authenticated request names who asked: the
// consumer and the token id (never the token); an unauthenticated one
// names nobody.
func TestAccessLogNamesTheTokenThatAsked(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	issued, err := a.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "acme", Abilities: []string{auth.LicensesRead}})
	if err != nil {
		t.Fatal(err)
	}
	a.do(http.MethodGet, "/api/licenses", "", bearer(issued.Secret)...).wantStatus(http.StatusOK)
	a.do(http.MethodGet, "/api/licenses", "").wantStatus(http.StatusUnauthorized)
	var lines []map[string]any
	for _, l := range strings.Split(a.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d access lines, want 2", len(lines))
	}
	if lines[0]["token_id"] != issued.ID || lines[0]["consumer_id"] == nil || lines[0]["consumer_id"] == "" {
		t.Errorf("the authenticated line: %v, want token_id %s and its consumer", lines[0], issued.ID)
	}
	if _, ok := lines[1]["token_id"]; ok {
		t.Errorf("the unauthenticated line names a token: %v", lines[1])
	}
	if strings.Contains(a.logs.String(), issued.Secret) {
		t.Error("the token reached the log")
	}
}
