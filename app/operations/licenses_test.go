package operations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorsim"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The phases of the licenses' operations and their failures, run through
// the guard (Do) and the reconciler as a request and a pending intent are.

var errInjected = errors.New("injected failure")

// vendor is the fake vendor failing the calls it is told to: each of
// createErr and deleteErr is the errors of the next calls of its kind, in
// turn; before runs as the vendor makes or deletes a site.
type vendor struct {
	licenses.Vendor
	mu                     sync.Mutex
	createErr, deleteErr   []error
	rotateErr              []error // the errors of the next rotations, in turn
	beforeCreate           func()
	beforeDelete           func()
	afterRotate            func() // runs once the vendor has rotated a key, before its answer returns
	beforeFind             func() // runs once before a find reads the vendor's sites
	afterFind              func() // runs once a find has read the vendor's site, before its answer returns
	afterCreate            func() // runs once the vendor has made a site, before its answer returns
	finds, creates, delete int
	// loseCreates is how many of the next creates make the site and lose
	// the answer (an *UncertainError).
	loseCreates int
}

func next(q *[]error) error {
	if len(*q) == 0 {
		return nil
	}
	err := (*q)[0]
	*q = (*q)[1:]
	return err
}

func (v *vendor) FindSite(ctx context.Context, domain string) (*licenses.Site, error) {
	v.mu.Lock()
	v.finds++
	before := v.beforeFind
	v.beforeFind = nil // once
	v.mu.Unlock()
	if before != nil {
		before()
	}
	site, err := v.Vendor.FindSite(ctx, domain)
	v.mu.Lock()
	hook := v.afterFind
	v.afterFind = nil // once
	v.mu.Unlock()
	if hook != nil {
		hook()
	}
	return site, err
}

func (v *vendor) CreateSite(ctx context.Context, name, domain string) (licenses.Site, error) {
	v.mu.Lock()
	v.creates++
	err, hook := next(&v.createErr), v.beforeCreate
	v.mu.Unlock()
	if err != nil {
		return licenses.Site{}, err
	}
	if hook != nil {
		hook()
	}
	site, err := v.Vendor.CreateSite(ctx, name, domain)
	v.mu.Lock()
	after := v.afterCreate
	v.afterCreate = nil // once
	if err == nil && v.loseCreates > 0 {
		v.loseCreates--
		site, err = licenses.Site{}, &licenses.UncertainError{Err: errors.New("the answer was lost")}
	}
	v.mu.Unlock()
	if after != nil {
		after()
	}
	return site, err
}

func (v *vendor) DeleteSite(ctx context.Context, id string) error {
	v.mu.Lock()
	v.delete++
	err, hook := next(&v.deleteErr), v.beforeDelete
	v.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return err
	}
	return v.Vendor.DeleteSite(ctx, id)
}

func (v *vendor) RotateKey(ctx context.Context, siteID string) (licenses.Site, error) {
	v.mu.Lock()
	err := next(&v.rotateErr)
	v.mu.Unlock()
	if err != nil {
		return licenses.Site{}, err
	}
	site, err := v.Vendor.RotateKey(ctx, siteID)
	v.mu.Lock()
	hook := v.afterRotate
	v.afterRotate = nil // once: a rotation the hook runs does not run it again
	v.mu.Unlock()
	if hook != nil {
		hook()
	}
	return site, err
}

func (v *vendor) calls() (finds, creates, deletes int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.finds, v.creates, v.delete
}

func (v *vendor) has(domain string) bool {
	site, err := v.Vendor.FindSite(context.Background(), domain)
	return err == nil && site != nil
}

// rig is the operations on a fresh database with consumers c1 and c2.
type rig struct {
	t      *testing.T
	db     *testdb.DB
	v      *vendor
	svc    *licenses.Service
	ops    Set
	store  *idempotency.Store
	guard  *idempotency.Guard
	rc     *idempotency.Reconciler
	made   atomic.Int64 // licenses made (ObserveCreated)
	cipher *crypt.Cipher
}

func newRig(t *testing.T, db *testdb.DB) *rig {
	t.Helper()
	c, err := crypt.New(bytes.Repeat([]byte{1}, crypt.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"c1", "c2"} {
		if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", id, id, now, now).Error; err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, db: db, v: &vendor{Vendor: fakeVendor(t)}, store: idempotency.NewStore(db.Gorm, c, nil, nil), cipher: c}
	r.svc = licenses.New(licenses.Config{DB: db.Gorm, Vendor: r.v, Cipher: c, ObserveCreated: func() { r.made.Add(1) }})
	r.ops = New(r.svc)
	list, err := idempotency.NewOperations(r.ops.List()...)
	if err != nil {
		t.Fatal(err)
	}
	if r.guard, err = idempotency.New(idempotency.Config{Store: r.store, Operations: list}); err != nil {
		t.Fatal(err)
	}
	r.rc = idempotency.NewReconciler(idempotency.ReconcilerConfig{Store: r.store, Operations: list})
	return r
}

// create asks for domain for consumer under key, as a request does.
func (r *rig) create(consumer, key, domain string) (idempotency.Response, error) {
	in := licenses.Input{Name: "Shop", Domain: domain}
	body, _ := json.Marshal(map[string]string{"name": in.Name, "domain": in.Domain})
	resp, _, err := r.ops.StoreLicense.Do(context.Background(), r.guard, idempotency.Caller{ConsumerID: consumer}, key, in, body)
	return resp, err
}

// license is the consumer's license created for domain.
func (r *rig) license(domain string) licenses.License {
	r.t.Helper()
	if _, err := r.create("c1", "setup-"+domain, domain); err != nil {
		r.t.Fatal(err)
	}
	lic, err := r.svc.Held(context.Background(), "c1", domain)
	if err != nil {
		r.t.Fatal(err)
	}
	return lic
}

// revoke asks c1 to revoke the license id, as a request does.
func (r *rig) revoke(id string) error {
	_, _, err := r.ops.RevokeLicense.Do(context.Background(), r.guard, idempotency.Caller{ConsumerID: "c1"}, id, id, nil)
	return err
}

// status is c1's license's status, as the service reads it.
func (r *rig) status(id string) string {
	lic, err := r.svc.Revocable(context.Background(), "c1", id)
	if err != nil {
		r.t.Fatal(err)
	}
	return lic.Status
}

// rows counts the rows of table.
func (r *rig) rows(table string) (n int64) {
	if err := r.db.Gorm.Raw("SELECT COUNT(*) FROM " + table).Scan(&n).Error; err != nil {
		r.t.Fatal(err)
	}
	return n
}

// intent sets the record of operation under key.
func (r *rig) intent(operation, key string, set map[string]any) {
	r.t.Helper()
	if err := r.db.Gorm.Model(&idempotency.Record{}).Where("operation = ? AND idempotency_key = ?", operation, key).Updates(set).Error; err != nil {
		r.t.Fatal(err)
	}
}

// reconcile runs one pass of the reconciler and returns its one result.
func (r *rig) reconcile() string {
	r.t.Helper()
	settled, err := r.rc.RunOnce(context.Background())
	if err != nil || len(settled) != 1 {
		r.t.Fatalf("RunOnce = %+v, %v; want one intent settled", settled, err)
	}
	return settled[0].Result
}

var unavailable = &licenses.UnavailableError{Err: errors.New("vendor down")}

// A revoke the vendor refused puts the license back to active; when even
// that write fails, the intent is kept pending (an *UncertainError naming
// both failures) and the license stays revoking, for the reconciler.
func TestRevokeWhoseRollbackFailsIsUncertain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		r.v.deleteErr = []error{unavailable}
		back := testdb.Inject(t, db.Gorm, "update", "licenses", testdb.Setting("status", licenses.StatusActive), errInjected)
		back.Arm(1)
		err := r.revoke(lic.ID)
		var uncertain *licenses.UncertainError
		if !errors.Is(err, idempotency.ErrPending) || !errors.As(err, &uncertain) || !errors.Is(err, licenses.ErrVendorUnavailable) || !errors.Is(err, errInjected) {
			t.Fatalf("revoke = %v; want it pending, of the vendor's failure and the rollback's", err)
		}
		if back.Hits() != 1 || r.status(lic.ID) != licenses.StatusRevoking || !r.v.has("a.test") {
			t.Errorf("rollback written %d times, status %s, site kept %v; want once, revoking, kept", back.Hits(), r.status(lic.ID), r.v.has("a.test"))
		}
	})
}

// A revoke the vendor refused, or that cannot mark the license revoking,
// leaves the license active; one that cannot mark it never reaches the
// vendor.
func TestRevokeThatDidNothingLeavesTheLicenseActive(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		testdb.Inject(t, db.Gorm, "update", "licenses", testdb.Setting("status", licenses.StatusRevoking), errInjected).Arm(1)
		if err := r.revoke(lic.ID); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "mark license revoking") {
			t.Fatalf("revoke = %v, want the mark's failure", err)
		}
		if _, _, deletes := r.v.calls(); deletes != 0 || r.status(lic.ID) != licenses.StatusActive {
			t.Errorf("%d deletes, status %s; want none, active", deletes, r.status(lic.ID))
		}
		r.v.deleteErr = []error{unavailable}
		if err := r.revoke(lic.ID); !errors.Is(err, licenses.ErrVendorUnavailable) || r.status(lic.ID) != licenses.StatusActive {
			t.Errorf("revoke = %v, status %s; want the vendor's failure, active", err, r.status(lic.ID))
		}
	})
}

// An intent whose Start cannot be recorded stops before the vendor hears
// of it: no site, no license, no revocation.
func TestStartFailingStopsTheChange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("b.test")
		started := testdb.Inject(t, db.Gorm, "update", "idempotency_keys", testdb.Setting("phase", "started"), errInjected)
		finds, creates, _ := r.v.calls()
		started.Arm(1)
		if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, errInjected) {
			t.Errorf("create = %v, want Start's error", err)
		}
		if f, c, _ := r.v.calls(); f != finds || c != creates || r.rows("licenses") != 1 {
			t.Errorf("%d finds, %d creates, %d licenses; want none more", f-finds, c-creates, r.rows("licenses"))
		}
		started.Arm(1)
		if err := r.revoke(lic.ID); !errors.Is(err, errInjected) {
			t.Errorf("revoke = %v, want Start's error", err)
		}
		if _, _, deletes := r.v.calls(); deletes != 0 || r.status(lic.ID) != licenses.StatusActive {
			t.Errorf("%d deletes, status %s; want none, active", deletes, r.status(lic.ID))
		}
	})
}

// An intent superseded while the vendor works has its change rolled back
// and answers ErrSuperseded, not an unknown outcome; a site made for it is
// deleted, and a revoked license stays revoking for the intent's owner.
func TestSupersededMeanwhileRollsTheChangeBack(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		r.v.beforeCreate = func() { r.intent("licenses.store", "k1", map[string]any{"status": "superseded"}) }
		if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, idempotency.ErrSuperseded) || errors.Is(err, idempotency.ErrPending) {
			t.Errorf("create = %v; want ErrSuperseded", err)
		}
		if r.rows("licenses") != 0 || r.rows("license_events") != 0 || r.v.has("a.test") {
			t.Errorf("%d licenses, %d events, site kept %v after a refused create; want none", r.rows("licenses"), r.rows("license_events"), r.v.has("a.test"))
		}
		r.v.beforeCreate = nil
		lic := r.license("b.test")
		r.v.beforeDelete = func() { r.intent("licenses.destroy", lic.ID, map[string]any{"status": "superseded"}) }
		if err := r.revoke(lic.ID); !errors.Is(err, idempotency.ErrSuperseded) {
			t.Errorf("revoke = %v; want ErrSuperseded", err)
		}
		if got := r.status(lic.ID); got != licenses.StatusRevoking {
			t.Errorf("status = %s, want revoking (the revocation rolled back, left to the intent's owner)", got)
		}
	})
}

// Two creates for one domain racing past the read: the loser's INSERT is
// refused by the unique index, and it answers with the winner's license
// (the same consumer's: 200, not stored) or ErrDomainTaken (another's).
func TestCreateLosesTheDomainRace(t *testing.T) {
	for _, winner := range []string{"c1", "c2"} {
		t.Run("won by "+winner, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				now := dbtime.Now()
				domain := "a.test"
				w := licenses.License{ID: "01WINNER", ConsumerID: winner, Name: "W", Domain: domain, ActiveDomain: &domain,
					LicenseKey: "LK-w", Status: licenses.StatusActive, VendorSiteID: "site-w", CreatedAt: now, UpdatedAt: now}
				r.v.beforeCreate = func() {
					if err := db.Gorm.Create(&w).Error; err != nil {
						t.Error(err)
					}
				}
				resp, err := r.create("c1", "k1", domain)
				switch {
				case winner == "c2" && !errors.Is(err, licenses.ErrDomainTaken):
					t.Fatalf("create = %v, want ErrDomainTaken", err)
				case winner == "c1" && (err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), w.ID)):
					t.Fatalf("create = %d %s, %v; want 200 with the winner's license", resp.Status, resp.Body, err)
				}
				if n := r.rows("licenses"); n != 1 {
					t.Errorf("%d licenses, want the winner's alone", n)
				}
			})
		})
	}
}

// The vendor holds the site but the license cannot be recorded (its event
// cannot be written): as unknown an outcome as a lost answer, the intent
// pending and known by its domain, and nothing half written. The site is
// the pending intent's: the reconciler records its license with it.
func TestRecordFailureIsUncertain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		testdb.Inject(t, db.Gorm, "create", "license_events", nil, errInjected).Arm(1)
		_, err := r.create("c1", "k1", "a.test")
		var uncertain *licenses.UncertainError
		if !errors.Is(err, idempotency.ErrPending) || !errors.As(err, &uncertain) || uncertain.Domain != "a.test" || !strings.Contains(err.Error(), "record license event") {
			t.Fatalf("create = %v; want it pending, an UncertainError for a.test", err)
		}
		if !r.v.has("a.test") || r.rows("licenses") != 0 || r.rows("license_events") != 0 {
			t.Errorf("site kept %v, %d licenses, %d events; want the site, nothing half written", r.v.has("a.test"), r.rows("licenses"), r.rows("license_events"))
		}
		if got := r.reconcile(); got != "completed" || r.rows("licenses") != 1 {
			t.Errorf("reconciled %s with %d licenses; want it completed, the site's license recorded", got, r.rows("licenses"))
		}
		r.holdsTheVendorsSite("c1", "a.test")
		if _, creates, _ := r.v.calls(); creates != 1 {
			t.Errorf("%d vendor creates; want the one (the site recorded, not made again)", creates)
		}
	})
}

// A site discarded whose delete failed stays at the vendor, claimed as
// discarded: it never blocks its domain. The intent's new owner finds it,
// deletes it, and makes the domain's site anew.
func TestDiscardWhoseDeleteFailedDoesNotBlockTheDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		other := dbtime.Now().Add(time.Hour) // the lease lost while the vendor made the site
		r.v.beforeCreate = func() { r.intent("licenses.store", "k1", map[string]any{"locked_until": other}) }
		r.v.deleteErr = []error{unavailable}
		if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Fatalf("create = %v; want ErrLeaseLost", err)
		}
		r.v.beforeCreate = nil
		stale, err := r.v.Vendor.FindSite(context.Background(), "a.test")
		if err != nil || stale == nil {
			t.Fatalf("the discarded site %+v (%v); want it still at the vendor (its delete failed)", stale, err)
		}
		r.intent("licenses.store", "k1", map[string]any{"status": "pending", "locked_until": nil}) // the new owner: the reconciler
		if got := r.reconcile(); got != "completed" {
			t.Fatalf("reconcile = %s; want completed", got)
		}
		if lic := r.holdsTheVendorsSite("c1", "a.test"); lic.VendorSiteID == stale.ID {
			t.Errorf("the license holds the discarded site %s", stale.ID)
		}
	})
}

// holdsTheVendorsSite fails the test unless the consumer's license for the
// domain holds the vendor's site for it.
func (r *rig) holdsTheVendorsSite(consumer, domain string) licenses.License {
	r.t.Helper()
	lic, err := r.svc.Held(context.Background(), consumer, domain)
	if err != nil {
		r.t.Fatal(err)
	}
	site, err := r.v.Vendor.FindSite(context.Background(), domain)
	if err != nil || site == nil || site.ID != lic.VendorSiteID {
		r.t.Errorf("the license's site %s, the vendor's %+v (%v); want the license to hold the vendor's site", lic.VendorSiteID, site, err)
	}
	return lic
}

// A create whose site was recorded for another license, since revoked (the
// site deleted at the vendor), before the create could record it, looks
// again: it makes the domain's site anew and records its license with it,
// never a license with no site at the vendor.
func TestCreateWhoseSiteWentMeanwhileLooksAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		first, err := r.v.Vendor.CreateSite(context.Background(), "Shop", "a.test")
		if err != nil {
			t.Fatal(err)
		}
		r.v.afterFind = func() { // c2 adopts the site, records its license, and revokes it
			if _, err := r.create("c2", "k2", "a.test"); err != nil {
				t.Error(err)
				return
			}
			lic, err := r.svc.Held(context.Background(), "c2", "a.test")
			if err != nil {
				t.Error(err)
				return
			}
			if _, _, err := r.ops.RevokeLicense.Do(context.Background(), r.guard, idempotency.Caller{ConsumerID: "c2"}, lic.ID, lic.ID, nil); err != nil {
				t.Error(err)
			}
		}
		resp, err := r.create("c1", "k1", "a.test")
		if err != nil || resp.Status != 201 {
			t.Fatalf("create = %d %s, %v; want 201", resp.Status, resp.Body, err)
		}
		if lic := r.holdsTheVendorsSite("c1", "a.test"); lic.VendorSiteID == first.ID {
			t.Errorf("the license holds the revoked license's site %s", first.ID)
		}
	})
}

// The vendor deleted the site but the revocation cannot be recorded: the
// intent pending, the license revoking; the reconciler finishes it (a site
// already gone counts as deleted), and a revoked license needs no vendor.
func TestRevokeWhoseRecordingFailsIsResumed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		testdb.Inject(t, db.Gorm, "create", "license_events", nil, errInjected).Arm(1)
		var uncertain *licenses.UncertainError
		if err := r.revoke(lic.ID); !errors.Is(err, idempotency.ErrPending) || !errors.As(err, &uncertain) || !errors.Is(err, errInjected) {
			t.Fatalf("revoke = %v; want it pending", err)
		}
		if got := r.status(lic.ID); got != licenses.StatusRevoking || r.v.has("a.test") {
			t.Errorf("status %s, site kept %v; want revoking, the site gone", got, r.v.has("a.test"))
		}
		if got := r.reconcile(); got != "completed" || r.status(lic.ID) != licenses.StatusRevoked {
			t.Errorf("reconciled %s, status %s; want it completed, revoked", got, r.status(lic.ID))
		}
		r.intent("licenses.destroy", lic.ID, map[string]any{"status": idempotency.StatusPending, "locked_until": nil})
		if got := r.reconcile(); got != "completed" {
			t.Errorf("reconciled a revoked license's intent: %s", got)
		}
		if _, _, deletes := r.v.calls(); deletes != 2 {
			t.Errorf("the vendor was asked to delete %d times, want 2 (a revoked license needs none)", deletes)
		}
	})
}

// A pending create is resumed: an input no longer valid fails for good and
// reaches no vendor; the vendor failing to make the missing site is a
// retry; a license its own intent made completes it (201), one another
// intent made supersedes it.
func TestResumeBranches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		pend := func(key string, body string, age time.Duration) {
			now := dbtime.Now()
			started := "started"
			rec := &idempotency.Record{ConsumerID: "c1", Operation: "licenses.store", Key: key, RequestHash: "h-" + key, RequestBody: []byte(body),
				Status: idempotency.StatusPending, Phase: &started, Attempts: 1, CreatedAt: now.Add(-age), UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if err := db.Gorm.Create(rec).Error; err != nil {
				t.Fatal(err)
			}
		}
		pend("bad", `{"name":"","domain":"http://x"}`, time.Hour)
		if got := r.reconcile(); got != "failed" {
			t.Errorf("an invalid input: %s, want failed", got)
		}
		if finds, _, _ := r.v.calls(); finds != 0 {
			t.Errorf("an invalid input reached the vendor (%d finds)", finds)
		}
		r.intent("licenses.store", "bad", map[string]any{"status": idempotency.StatusDiscarded})

		r.v.createErr = []error{unavailable}
		pend("down", `{"name":"A","domain":"a.test"}`, time.Hour)
		if got := r.reconcile(); got != "retry" || r.rows("licenses") != 0 {
			t.Errorf("the vendor down: %s, %d licenses; want a retry, none", got, r.rows("licenses"))
		}
		r.intent("licenses.store", "down", map[string]any{"status": idempotency.StatusDiscarded})

		lic := r.license("b.test")
		pend("other", `{"name":"A","domain":"b.test"}`, 0)
		if got := r.reconcile(); got != "superseded" {
			t.Errorf("another intent's license: %s, want superseded", got)
		}
		r.intent("licenses.store", "setup-b.test", map[string]any{"status": idempotency.StatusPending, "locked_until": nil})
		if got := r.reconcile(); got != "completed" {
			t.Errorf("its own intent's license: %s, want completed", got)
		}
		resp, _, err := r.ops.StoreLicense.Do(context.Background(), r.guard, idempotency.Caller{ConsumerID: "c1"}, "setup-b.test",
			licenses.Input{Name: "Shop", Domain: "b.test"}, []byte(`{"domain":"b.test","name":"Shop"}`))
		if err != nil || resp.Status != 201 || !strings.Contains(string(resp.Body), lic.ID) {
			t.Errorf("its replay = %d %s, %v; want its license, created", resp.Status, resp.Body, err)
		}
	})
}

// ObserveCreated is told once for each license made, after its row
// committed: a create, and a pending create resumed; not for a domain the
// consumer already held, another's domain, nor a create superseded meanwhile.
func TestObserveCreatedCountsLicensesMade(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		r.license("a.test")
		if resp, err := r.create("c1", "k2", "a.test"); err != nil || resp.Status != 200 {
			t.Fatalf("the held domain again = %d, %v", resp.Status, err)
		}
		if _, err := r.create("c2", "k3", "a.test"); !errors.Is(err, licenses.ErrDomainTaken) {
			t.Fatalf("another's domain = %v", err)
		}
		r.v.beforeCreate = func() { r.intent("licenses.store", "k4", map[string]any{"status": "superseded"}) }
		if _, err := r.create("c1", "k4", "refused.test"); err == nil {
			t.Fatal("a create superseded meanwhile succeeded")
		}
		r.v.beforeCreate = nil
		if n := r.made.Load(); n != 1 {
			t.Fatalf("ObserveCreated told %d times, want 1 (the one license made)", n)
		}
		r.v.createErr = []error{&licenses.UncertainError{Err: errors.New("lost answer")}}
		if _, err := r.create("c1", "k5", "b.test"); !errors.Is(err, idempotency.ErrPending) {
			t.Fatalf("create = %v, want it pending", err)
		}
		r.intent("licenses.store", "k5", map[string]any{"created_at": time.Now().UTC().Add(-time.Hour)})
		if got := r.reconcile(); got != "completed" {
			t.Fatalf("reconciled %s", got)
		}
		if n := r.made.Load(); n != 2 {
			t.Errorf("ObserveCreated told %d times after a resumed create, want 2", n)
		}
	})
}

// fakeVendor is the fake vendor as VENDOR_DRIVER=fake serves it: the http
// driver on the simulator, in process.
func fakeVendor(t *testing.T) licenses.Vendor {
	t.Helper()
	sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vendorclient.NewInProcess(sim, config.Vendor{}, nil)
}

// A revoke the vendor refused puts the license back; when the feed showed it
// revoking meanwhile (the vendor rotated its key during the revoke), the
// license as it is again is published after that event, so the feed's last
// event is the license as it is. With no event meanwhile, none is written.
func TestRefusedRevokeRepublishesWhatTheFeedShowedRevoking(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		r.v.deleteErr = []error{unavailable}
		if err := r.revoke(lic.ID); !errors.Is(err, licenses.ErrVendorUnavailable) {
			t.Fatalf("revoke = %v; want the vendor's failure", err)
		}
		if n := r.rows("consumer_events"); n != 1 {
			t.Fatalf("%d consumer events after a refused revoke with nothing meanwhile; want the creation's alone", n)
		}
		r.v.deleteErr = []error{unavailable}
		r.v.beforeDelete = func() {
			ev := licenses.VendorEvent{ID: "evt_1", Type: licenses.SiteKeyRotated, At: time.Now().UTC(),
				Site: licenses.Site{ID: lic.VendorSiteID, Domain: "a.test", LicenseKey: "LK-rotated"}}
			if err := db.Gorm.Transaction(func(tx *gorm.DB) error {
				_, err := r.svc.ApplyVendorEvent(context.Background(), tx, ev)
				return err
			}); err != nil {
				t.Error(err)
			}
		}
		if err := r.revoke(lic.ID); !errors.Is(err, licenses.ErrVendorUnavailable) {
			t.Fatalf("revoke = %v; want the vendor's failure", err)
		}
		var evs []events.Event
		if err := db.Gorm.Where("subject_id = ?", lic.ID).Order("sequence").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, e.Type)
		}
		want := []string{events.LicenseCreated, events.LicenseKeyRotated, events.LicenseReactivated}
		if !slices.Equal(types, want) || evs[2].Sequence != 3 {
			t.Fatalf("events %v; want %v, numbered 1 to 3", types, want)
		}
		log := events.New(db.Gorm, nil, r.cipher)
		for i, status := range []string{"revoking", "active"} {
			body, err := log.Body(evs[i+1])
			if err != nil || !strings.Contains(string(body), `"status":"`+status+`"`) || !strings.Contains(string(body), "LK-rotated") {
				t.Errorf("event %s = %s, %v; want the license %s, its key rotated", evs[i+1].Type, body, err, status)
			}
		}
		if got := r.status(lic.ID); got != licenses.StatusActive {
			t.Errorf("status %s; want active", got)
		}
	})
}

// A create at the vendor when a revoke superseded its intent, that never
// learnt it made the site (the vendor's answer lost), leaves the site
// nobody holds; once the create's lease is over, the reconciler clears it
// (the intent is never resumed), and never before: the create may still be
// at the vendor.
func TestReconcilerClearsTheSiteOfASupersededCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		r.v.beforeCreate = func() { // meanwhile: c1's license for the domain, made and revoked
			r.v.beforeCreate = nil
			lic := r.license("a.test")
			if err := r.revoke(lic.ID); err != nil {
				t.Error(err)
			}
			r.v.loseCreates = 1
		}
		if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, idempotency.ErrSuperseded) {
			t.Fatalf("create = %v; want ErrSuperseded", err)
		}
		if !r.v.has("a.test") {
			t.Fatal("the vendor has no site for a.test: the scenario did not happen")
		}
		if _, err := r.rc.RunOnce(context.Background()); err != nil || !r.v.has("a.test") {
			t.Fatalf("RunOnce = %v, site kept %v; want the site left while the create's lease lasts", err, r.v.has("a.test"))
		}
		phase := func() string {
			var phase string
			if err := db.Gorm.Model(&idempotency.Record{}).Where("operation = ? AND idempotency_key = ?", "licenses.store", "k1").
				Select("phase").Scan(&phase).Error; err != nil {
				t.Fatal(err)
			}
			return phase
		}
		r.intent("licenses.store", "k1", map[string]any{"locked_until": dbtime.Now().Add(-time.Second)})
		r.v.deleteErr = []error{unavailable} // the vendor refuses the first clear: tried again
		if _, err := r.rc.RunOnce(context.Background()); err != nil || !r.v.has("a.test") || phase() != "started" {
			t.Fatalf("RunOnce = %v, site kept %v, phase %s; want the clear failed, to be tried again (started)", err, r.v.has("a.test"), phase())
		}
		r.intent("licenses.store", "k1", map[string]any{"locked_until": dbtime.Now().Add(-time.Second)}) // its backoff over
		if _, err := r.rc.RunOnce(context.Background()); err != nil || r.v.has("a.test") {
			t.Fatalf("RunOnce = %v, site kept %v; want the superseded create's site deleted", err, r.v.has("a.test"))
		}
		if got := phase(); got != "finished" {
			t.Errorf("the superseded intent's phase is %q; want finished, cleared", got)
		}
		_, _, deletes := r.v.calls()
		if _, err := r.rc.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, _, again := r.v.calls(); again != deletes {
			t.Errorf("%d deletes after another pass, %d before; want it cleared once", again, deletes)
		}
	})
}

// A create that lists the domain while another license's revoke has
// deleted its site (not yet recorded) makes a site, then meets that
// license still revoking (the create read the domain as free before: here
// the license's domain is hidden from that read): another consumer's is 409 domain_taken, its own
// consumer's the 200 of that license. Either way the site it made is
// nobody's and is deleted. When even the discard cannot be written, the
// outcome is kept unknown (202) and the reconciler, finding the site,
// discards it and fails the intent.
func TestCreateThatMeetsARevokingLicenseDiscardsItsSite(t *testing.T) {
	// revoking makes the consumer's license for a.test, and has its revoke
	// reach the vendor (not yet recorded) once the next create has read
	// that the domain has no license.
	revoking := func(r *rig, consumer string) licenses.License {
		r.t.Helper()
		if _, err := r.create(consumer, "setup", "a.test"); err != nil {
			r.t.Fatal(err)
		}
		lic, err := r.svc.Held(context.Background(), consumer, "a.test")
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.svc.MarkRevoking(context.Background(), lic); err != nil {
			r.t.Fatal(err)
		}
		if err := r.db.Gorm.Model(&licenses.License{}).Where("id = ?", lic.ID).Update("active_domain", nil).Error; err != nil {
			r.t.Fatal(err)
		}
		r.v.beforeFind = func() {
			if err := r.db.Gorm.Model(&licenses.License{}).Where("id = ?", lic.ID).Update("active_domain", "a.test").Error; err != nil {
				r.t.Error(err)
			}
			if err := r.v.Vendor.DeleteSite(context.Background(), lic.VendorSiteID); err != nil {
				r.t.Error(err)
			}
		}
		return lic
	}
	t.Run("another consumer's", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			r := newRig(t, db)
			revoking(r, "c2")
			if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, licenses.ErrDomainTaken) {
				t.Fatalf("create = %v; want ErrDomainTaken", err)
			}
			if _, creates, _ := r.v.calls(); creates != 2 || r.v.has("a.test") {
				t.Errorf("%d vendor creates, site kept %v; want the second site made and deleted", creates, r.v.has("a.test"))
			}
		})
	})
	t.Run("its own consumer's", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			r := newRig(t, db)
			lic := revoking(r, "c1")
			resp, err := r.create("c1", "k1", "a.test")
			if err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), lic.ID) {
				t.Fatalf("create = %d %s, %v; want 200 with the revoking license", resp.Status, resp.Body, err)
			}
			if r.v.has("a.test") {
				t.Error("the site the create made is still at the vendor")
			}
		})
	})
	t.Run("the discard not written", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			r := newRig(t, db)
			revoking(r, "c2")
			testdb.Inject(t, db.Gorm, "create", "vendor_site_claims", nil, errInjected).Arm(1)
			if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, idempotency.ErrPending) || !errors.Is(err, errInjected) {
				t.Fatalf("create = %v; want it pending, of the claim's failure", err)
			}
			if !r.v.has("a.test") {
				t.Fatal("the site is gone before the reconciler ran")
			}
			r.intent("licenses.store", "k1", map[string]any{"created_at": time.Now().UTC().Add(-time.Hour)})
			if got := r.reconcile(); got != "failed" || r.v.has("a.test") {
				t.Errorf("reconciled %s, site kept %v; want it failed (the domain taken), the site deleted", got, r.v.has("a.test"))
			}
		})
	})
}

// The reconciler's pass deletes at the vendor a discarded site whose
// delete failed, once the vendor answers.
func TestReconcilerDeletesOwedSites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		site, err := r.v.Vendor.CreateSite(context.Background(), "Shop", "a.test")
		if err != nil {
			t.Fatal(err)
		}
		r.v.deleteErr = []error{unavailable}
		if err := r.svc.DiscardSite(context.Background(), site, "a.test"); err != nil || !r.v.has("a.test") {
			t.Fatalf("DiscardSite = %v, site kept %v; want its delete owed", err, r.v.has("a.test"))
		}
		rc := idempotency.NewReconciler(idempotency.ReconcilerConfig{Store: r.store, Operations: r.guard.Operations(),
			Sweep: func(ctx context.Context) error { _, err := r.svc.DeleteOwedSites(ctx, 100); return err }})
		if _, err := rc.RunOnce(context.Background()); err != nil || r.v.has("a.test") {
			t.Errorf("RunOnce = %v, site kept %v; want the owed delete done", err, r.v.has("a.test"))
		}
	})
}
