package licenses

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The failure branches of the service, each hit by a vendor and a database
// that fail on command.

var errInjected = errors.New("injected failure")

// scriptVendor is a vendor that keeps its sites in memory and fails the
// calls it is told to: each of findErr, createErr, deleteErr and listErr is the
// errors of the next calls of its kind, in turn (nil: that call succeeds).
type scriptVendor struct {
	mu                           sync.Mutex
	sites                        map[string]Site // by domain
	findErr, createErr, listErr  []error
	deleteErr                    []error
	beforeCreate                 func(domain string) // runs as the vendor makes the site
	beforeDelete                 func(id string)     // runs as the vendor deletes the site
	extra                        []Site              // more sites ListSites shows
	finds, creates, deletes, nid int
}

func newVendor() *scriptVendor { return &scriptVendor{sites: map[string]Site{}} }

func next(q *[]error) error {
	if len(*q) == 0 {
		return nil
	}
	err := (*q)[0]
	*q = (*q)[1:]
	return err
}

func (v *scriptVendor) FindSite(_ context.Context, domain string) (*Site, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.finds++
	if err := next(&v.findErr); err != nil {
		return nil, err
	}
	site, ok := v.sites[domain]
	if !ok {
		return nil, nil
	}
	return &site, nil
}

func (v *scriptVendor) CreateSite(_ context.Context, name, domain string) (Site, error) {
	v.mu.Lock()
	v.creates++
	err := next(&v.createErr)
	hook := v.beforeCreate
	v.mu.Unlock()
	if err != nil {
		return Site{}, err
	}
	if hook != nil {
		hook(domain)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.nid++
	site := Site{ID: fmt.Sprintf("site-%d", v.nid), Name: name, Domain: domain, LicenseKey: "LK-" + domain, Status: StatusActive}
	v.sites[domain] = site
	return site, nil
}

func (v *scriptVendor) DeleteSite(_ context.Context, id string) error {
	v.mu.Lock()
	hook := v.beforeDelete
	v.mu.Unlock()
	if hook != nil {
		hook(id)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deletes++
	if err := next(&v.deleteErr); err != nil {
		return err
	}
	for d, s := range v.sites {
		if s.ID == id {
			delete(v.sites, d)
		}
	}
	return nil
}

// RotateKey is not scripted: no test here rotates a key.
func (v *scriptVendor) RotateKey(context.Context, string) (Site, error) {
	return Site{}, ErrVendorSiteNotFound
}

// ListSites pages through the sites, ordered by id.
func (v *scriptVendor) ListSites(_ context.Context, page, perPage int) ([]Site, int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := next(&v.listErr); err != nil {
		return nil, 0, err
	}
	all := slices.Clone(v.extra)
	for _, s := range v.sites {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b Site) int { return strings.Compare(a.ID, b.ID) })
	from := min((page-1)*perPage, len(all))
	return all[from:min(from+perPage, len(all))], len(all), nil
}

func (v *scriptVendor) counts() (finds, creates, deletes int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.finds, v.creates, v.deletes
}

func (v *scriptVendor) has(domain string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.sites[domain]
	return ok
}

var (
	unavailable = &UnavailableError{Err: errors.New("vendor down")}
	rejected    = &RejectedError{Status: 422, Message: "refused"}
)

// bench is a service on a fresh database with consumers c1 and c2.
type bench struct {
	t  *testing.T
	db *testdb.DB
	v  *scriptVendor
	s  *Service
}

func newBench(t *testing.T, db *testdb.DB) *bench {
	t.Helper()
	seedConsumer(t, db, "c1")
	seedConsumer(t, db, "c2")
	v := newVendor()
	return &bench{t: t, db: db, v: v, s: New(Config{DB: db.Gorm, Vendor: v, Cipher: testCipher(t, 1)})}
}

// create licenses domain to c1, made by intent ("" for none).
func (b *bench) create(domain, intent string) License {
	b.t.Helper()
	lic, created, err := b.s.Create(context.Background(), "c1", Input{Name: "A", Domain: domain}, Steps{IntentID: intent})
	if err != nil || !created {
		b.t.Fatalf("Create %s = %v, %v", domain, created, err)
	}
	return lic
}

// status is the license's stored status.
func (b *bench) status(id string) string {
	b.t.Helper()
	var status string
	if err := b.db.Gorm.Raw("SELECT status FROM licenses WHERE id = ?", id).Scan(&status).Error; err != nil {
		b.t.Fatal(err)
	}
	return status
}

// rows counts the rows of table.
func (b *bench) rows(table string) int64 {
	b.t.Helper()
	var n int64
	if err := b.db.Gorm.Table(table).Count(&n).Error; err != nil {
		b.t.Fatal(err)
	}
	return n
}

// refusal is a caller's refusal of the change (as app/idempotency's lost
// lease or superseded intent is).
type refusal struct{}

func (refusal) Error() string       { return "refused by its caller" }
func (refusal) CallerRefusal() bool { return true }

// sealFails is a Cipher that cannot seal.
type sealFails struct{ *crypt.Cipher }

func (sealFails) Encrypt([]byte) (string, error) { return "", errors.New("injected: cannot seal") }

// A revoke the vendor refused puts the license back to active; when even
// that write fails, the intent is kept (an *UncertainError naming both
// failures) and the license stays revoking, for the reconciler to finish.
func TestRevokeWhoseRollbackFailsIsUncertain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		lic := b.create("a.test", "")
		b.v.deleteErr = []error{unavailable}
		back := testdb.Inject(t, db.Gorm, "update", "licenses", testdb.Setting("status", StatusActive), errInjected)
		back.Arm(1)
		err := b.s.Revoke(context.Background(), "c1", lic.ID, Steps{})
		var uncertain *UncertainError
		if !errors.As(err, &uncertain) || !errors.Is(err, ErrVendorUnavailable) || !errors.Is(err, errInjected) {
			t.Fatalf("Revoke = %v; want an UncertainError of the vendor's failure and the rollback's", err)
		}
		if back.Hits() != 1 {
			t.Errorf("the rollback was written %d times, want once", back.Hits())
		}
		if got := b.status(lic.ID); got != StatusRevoking {
			t.Errorf("status = %s, want revoking", got)
		}
		if !b.v.has("a.test") {
			t.Error("the vendor's site is gone though it refused")
		}
	})
}

// A revoke that cannot mark the license revoking stops there: the vendor
// never hears of it and the license stays active.
func TestRevokeThatCannotMarkRevokingReachesNoVendor(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		lic := b.create("a.test", "")
		testdb.Inject(t, db.Gorm, "update", "licenses", testdb.Setting("status", StatusRevoking), errInjected).Arm(1)
		err := b.s.Revoke(context.Background(), "c1", lic.ID, Steps{})
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "mark license revoking") {
			t.Fatalf("Revoke = %v, want the mark's failure", err)
		}
		if _, _, deletes := b.v.counts(); deletes != 0 {
			t.Errorf("the vendor was asked to delete %d times", deletes)
		}
		if got := b.status(lic.ID); got != StatusActive {
			t.Errorf("status = %s, want active", got)
		}
	})
}

// A caller whose recovery point cannot be recorded (steps.Started) stops
// the change before the vendor hears of it: no site, no license, no
// revocation.
func TestStartedFailingStopsTheChange(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		stop := Steps{Started: func(context.Context) error { return errInjected }}
		if _, _, err := b.s.Create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, stop); !errors.Is(err, errInjected) {
			t.Errorf("Create = %v, want Started's error", err)
		}
		if finds, creates, _ := b.v.counts(); finds+creates != 0 || b.rows("licenses") != 0 {
			t.Errorf("%d finds, %d creates, %d licenses; want none", finds, creates, b.rows("licenses"))
		}
		lic := b.create("b.test", "")
		if err := b.s.Revoke(ctx, "c1", lic.ID, stop); !errors.Is(err, errInjected) {
			t.Errorf("Revoke = %v, want Started's error", err)
		}
		if _, _, deletes := b.v.counts(); deletes != 0 || b.status(lic.ID) != StatusActive {
			t.Errorf("%d deletes, status %s; want none, active", deletes, b.status(lic.ID))
		}
	})
}

// A caller that refuses the change in its Commit (its intent superseded,
// its lease lost) has the change's writes rolled back and its refusal
// answered as it is, not taken for an unknown outcome.
func TestCallerRefusalRollsTheChangeBack(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		refuse := Steps{Commit: func(*gorm.DB, License, bool) error { return fmt.Errorf("complete: %w", refusal{}) }}
		var uncertain *UncertainError
		_, created, err := b.s.Create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, refuse)
		if !errors.As(err, &refusal{}) || errors.As(err, &uncertain) || created {
			t.Errorf("Create = %v, %v; want the refusal as it is", created, err)
		}
		if b.rows("licenses") != 0 || b.rows("license_events") != 0 {
			t.Errorf("%d licenses, %d events after a refused create; want none", b.rows("licenses"), b.rows("license_events"))
		}

		lic := b.create("b.test", "")
		err = b.s.Revoke(ctx, "c1", lic.ID, refuse)
		if !errors.As(err, &refusal{}) || errors.As(err, &uncertain) {
			t.Errorf("Revoke = %v; want the refusal as it is", err)
		}
		if got := b.status(lic.ID); got != StatusRevoking {
			t.Errorf("status = %s, want revoking (the revocation rolled back, left to the intent's owner)", got)
		}
	})
}

// Two creates for one domain racing past the read: the loser's INSERT is
// refused by the unique index, and it answers with the winner's license
// (the same consumer's: not created) or ErrDomainTaken (another's).
func TestRecordLosesTheDomainRace(t *testing.T) {
	for _, tt := range []struct {
		winner string
		want   error
	}{{"c1", nil}, {"c2", ErrDomainTaken}} {
		t.Run("won by "+tt.winner, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				b := newBench(t, db)
				now := dbtime.Now()
				domain := "a.test"
				winner := License{ID: "01WINNER", ConsumerID: tt.winner, Name: "W", Domain: domain, ActiveDomain: &domain,
					LicenseKey: "LK-w", Status: StatusActive, VendorSiteID: "site-w", CreatedAt: now, UpdatedAt: now}
				b.v.beforeCreate = func(string) {
					if err := db.Gorm.Create(&winner).Error; err != nil {
						t.Error(err)
					}
				}
				lic, created, err := b.s.Create(context.Background(), "c1", Input{Name: "A", Domain: domain}, Steps{})
				if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) || created {
					t.Fatalf("Create = %+v, %v, %v; want not created, error %v", lic, created, err, tt.want)
				}
				if tt.want == nil && lic.ID != winner.ID {
					t.Errorf("Create answered %s, want the winner's %s", lic.ID, winner.ID)
				}
				if n := b.rows("licenses"); n != 1 {
					t.Errorf("%d licenses, want the winner's alone", n)
				}
			})
		})
	}
}

// Resume refuses a stored input that is no longer valid, answers the
// vendor's failure to make a missing site, and tells apart the license its
// own intent made (created) from one another intent made (ErrMadeByAnother).
func TestResumeBranches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		var verr *ValidationError
		if _, _, found, err := b.s.Resume(ctx, "c1", Input{Name: "", Domain: "http://x"}, true, Steps{}); !errors.As(err, &verr) || found {
			t.Errorf("Resume of an invalid input = %v, %v; want a ValidationError", found, err)
		}
		if finds, _, _ := b.v.counts(); finds != 0 {
			t.Errorf("an invalid input reached the vendor (%d finds)", finds)
		}

		b.v.createErr = []error{unavailable}
		if _, _, found, err := b.s.Resume(ctx, "c1", Input{Name: "A", Domain: "a.test"}, true, Steps{}); !errors.Is(err, ErrVendorUnavailable) || found {
			t.Errorf("Resume with the vendor down = %v, %v; want the vendor's error", found, err)
		}
		if b.rows("licenses") != 0 {
			t.Error("a license was recorded without a site")
		}

		lic := b.create("b.test", "intent-A")
		if _, _, _, err := b.s.Resume(ctx, "c1", Input{Name: "A", Domain: "b.test"}, false, Steps{IntentID: "intent-B"}); !errors.Is(err, ErrMadeByAnother) {
			t.Errorf("Resume of another intent = %v, want ErrMadeByAnother", err)
		}
		got, created, found, err := b.s.Resume(ctx, "c1", Input{Name: "A", Domain: "b.test"}, false, Steps{IntentID: "intent-A"})
		if err != nil || !created || !found || got.ID != lic.ID {
			t.Errorf("Resume of its own intent = %s, %v, %v, %v; want its license, created", got.ID, created, found, err)
		}
	})
}

// The vendor holds the site but the license cannot be recorded (its event
// cannot be written, its key cannot be sealed): as unknown an outcome as a
// lost answer, an *UncertainError known by the domain, and nothing half
// written.
func TestRecordFailuresAreUncertain(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sealX  bool
		events bool
		says   string
	}{
		{name: "the event cannot be written", events: true, says: "record license event"},
		{name: "the key cannot be sealed", sealX: true, says: "encrypt license key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				b := newBench(t, db)
				if tt.sealX {
					b.s = New(Config{DB: db.Gorm, Vendor: b.v, Cipher: sealFails{testCipher(t, 1)}})
				}
				if tt.events {
					testdb.Inject(t, db.Gorm, "create", "license_events", nil, errInjected).Arm(1)
				}
				_, _, err := b.s.Create(context.Background(), "c1", Input{Name: "A", Domain: "a.test"}, Steps{})
				var uncertain *UncertainError
				if !errors.As(err, &uncertain) || uncertain.Domain != "a.test" || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("Create = %v; want an UncertainError for a.test saying %q", err, tt.says)
				}
				if !b.v.has("a.test") {
					t.Error("the vendor has no site: the outcome was known")
				}
				if b.rows("licenses") != 0 || b.rows("license_events") != 0 {
					t.Errorf("%d licenses, %d events; want nothing half written", b.rows("licenses"), b.rows("license_events"))
				}
			})
		})
	}
}

// The vendor deleted the site but the revocation cannot be recorded: an
// *UncertainError, the license left revoking for the reconciler (a site
// already gone counts as deleted).
func TestRevokeWhoseRecordingFailsIsUncertain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		lic := b.create("a.test", "")
		testdb.Inject(t, db.Gorm, "create", "license_events", nil, errInjected).Arm(1)
		err := b.s.Revoke(context.Background(), "c1", lic.ID, Steps{})
		var uncertain *UncertainError
		if !errors.As(err, &uncertain) || !errors.Is(err, errInjected) {
			t.Fatalf("Revoke = %v; want an UncertainError", err)
		}
		if got := b.status(lic.ID); got != StatusRevoking || b.v.has("a.test") {
			t.Errorf("status %s, site kept %v; want revoking, the site gone", got, b.v.has("a.test"))
		}
		if err := b.s.ResumeRevoke(context.Background(), "c1", lic.ID, Steps{}); err != nil || b.status(lic.ID) != StatusRevoked {
			t.Errorf("ResumeRevoke = %v, status %s; want it revoked", err, b.status(lic.ID))
		}
		if err := b.s.ResumeRevoke(context.Background(), "c1", lic.ID, Steps{}); err != nil {
			t.Errorf("ResumeRevoke of a revoked license = %v, want nothing to do", err)
		}
		if _, _, deletes := b.v.counts(); deletes != 2 {
			t.Errorf("the vendor was asked to delete %d times, want 2 (a revoked license needs none)", deletes)
		}
	})
}

// Every read fails with an error that says what failed, and a create whose
// read fails never reaches the vendor.
func TestReadFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		lic := b.create("a.test", "")
		finds, _, _ := b.v.counts()
		licenses := testdb.Inject(t, db.Gorm, "query", "licenses", nil, errInjected)
		events := testdb.Inject(t, db.Gorm, "query", "license_events", nil, errInjected)
		for _, tt := range []struct {
			says string
			arm  func()
			call func() error
		}{
			{"find license by domain", func() { licenses.Arm(1) }, func() error {
				_, _, err := b.s.Create(ctx, "c1", Input{Name: "B", Domain: "b.test"}, Steps{})
				return err
			}},
			{"count licenses", func() { licenses.Arm(1) }, func() error { _, err := b.s.List(ctx, "c1", 1, 10); return err }},
			{"list licenses", func() { licenses.ArmAfter(1, 1) }, func() error { _, err := b.s.List(ctx, "c1", 1, 10); return err }},
			{"list licenses after a cursor", func() { licenses.Arm(1) }, func() error { _, err := b.s.ListCursor(ctx, "c1", nil, 10); return err }},
			{"get license", func() { licenses.Arm(1) }, func() error { _, err := b.s.Get(ctx, "c1", lic.ID); return err }},
			{"get license", func() { licenses.Arm(1) }, func() error { return b.s.ResumeRevoke(ctx, "c1", lic.ID, Steps{}) }},
			{"list license events", func() { events.Arm(1) }, func() error { _, err := b.s.Events(ctx, "c1", lic.ID); return err }},
		} {
			tt.arm()
			if err := tt.call(); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s: err = %v, want the injected failure, said so", tt.says, err)
			}
			licenses.Arm(0)
			events.Arm(0)
		}
		if f, _, _ := b.v.counts(); f != finds {
			t.Errorf("a failed read reached the vendor (%d finds)", f-finds)
		}
		if got := b.status(lic.ID); got != StatusActive {
			t.Errorf("status = %s, want active", got)
		}
	})
}

// Under a key that cannot open the license's, a create for its domain and
// a keyset listing fail with ErrDecrypt, and the create reaches no vendor.
func TestUndecryptableKeyFailsCreateAndCursor(t *testing.T) {
	db := testdb.New(t, "sqlite")
	b := newBench(t, db)
	b.create("a.test", "")
	other := New(Config{DB: db.Gorm, Vendor: b.v, Cipher: testCipher(t, 2)})
	ctx := context.Background()
	finds, _, _ := b.v.counts()
	if _, _, err := other.Create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, Steps{}); !errors.Is(err, crypt.ErrDecrypt) {
		t.Errorf("Create = %v, want ErrDecrypt", err)
	}
	if f, _, _ := b.v.counts(); f != finds {
		t.Error("the create reached the vendor")
	}
	if _, err := other.ListCursor(ctx, "c1", nil, 10); !errors.Is(err, crypt.ErrDecrypt) {
		t.Errorf("ListCursor = %v, want ErrDecrypt", err)
	}
}

// seedLicense inserts a license row as it was stored before encryption at
// rest (its key readable as it is).
func seedLicense(t *testing.T, db *testdb.DB, id, status, site, key string, created time.Time) {
	t.Helper()
	domain := id + ".test"
	lic := License{ID: id, ConsumerID: "c1", Name: id, Domain: domain, ActiveDomain: &domain, LicenseKey: key,
		Status: status, VendorSiteID: site, CreatedAt: created, UpdatedAt: created}
	if err := db.Gorm.Create(&lic).Error; err != nil {
		t.Fatal(err)
	}
}

// A drift check leaves a license being revoked to its intent (and its site
// is not an orphan), skips one newer than the check, reactivates a license
// whose site the vendor reactivated, and reports orphan sites in site order.
func TestDriftSkipsRevokingAndNewLicenses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		now := dbtime.Now()
		b.s.now = func() time.Time { return now }
		past := now.Add(-time.Hour)
		seedLicense(t, db, "revoking", StatusRevoking, "s1", "K1", past)
		seedLicense(t, db, "suspended", StatusSuspended, "s2", "K2", past)
		seedLicense(t, db, "newer", StatusActive, "s-gone", "K3", now.Add(time.Minute))
		b.v.extra = []Site{
			{ID: "s1", Domain: "revoking.test", LicenseKey: "K1", Status: StatusActive},
			{ID: "s2", Domain: "suspended.test", LicenseKey: "K2", Status: StatusActive},
			{ID: "s9", Domain: "nine.test", Status: StatusActive},
			{ID: "s8", Domain: "eight.test", Status: StatusActive},
		}
		report, err := b.s.Drift(context.Background(), b.v, true)
		if err != nil {
			t.Fatal(err)
		}
		want := []Mismatch{
			{Kind: DriftStatus, LicenseID: "suspended", SiteID: "s2", Domain: "suspended.test", Action: "reactivate", Fixed: true},
			{Kind: DriftOrphanSite, SiteID: "s8", Domain: "eight.test"},
			{Kind: DriftOrphanSite, SiteID: "s9", Domain: "nine.test"},
		}
		if report.Sites != 4 || report.Licenses != 1 || !slices.Equal(report.Mismatches, want) {
			t.Errorf("report = %+v, want 4 sites, 1 license compared, %+v", report, want)
		}
		if got := b.status("suspended"); got != StatusActive {
			t.Errorf("the reactivated license is %s, want active", got)
		}
		if got := b.status("revoking"); got != StatusRevoking {
			t.Errorf("the revoking license is %s, want it left to its intent", got)
		}
	})
}

// A drift check fails, with what failed, when the vendor's sites cannot be
// listed, the licenses cannot be read, a license's key cannot be opened, or
// a fix cannot be written.
func TestDriftFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "gone", StatusActive, "s-gone", "K", past)
		b.v.extra = []Site{{ID: "s-other", Domain: "other.test", Status: StatusActive}} // the vendor lists something

		b.v.listErr = []error{unavailable}
		if _, err := b.s.Drift(ctx, b.v, false); !errors.Is(err, ErrVendorUnavailable) || !strings.Contains(err.Error(), "list vendor sites, page 1") {
			t.Errorf("Drift with the vendor down = %v", err)
		}

		read := testdb.Inject(t, db.Gorm, "query", "licenses", nil, errInjected)
		read.Arm(1)
		if _, err := b.s.Drift(ctx, b.v, false); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "read licenses") {
			t.Errorf("Drift with the licenses unreadable = %v", err)
		}

		fix := testdb.Inject(t, db.Gorm, "update", "licenses", nil, errInjected)
		fix.Arm(1)
		if _, err := b.s.Drift(ctx, b.v, true); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "fix license gone") {
			t.Errorf("Drift whose fix fails = %v", err)
		}
		if got := b.status("gone"); got != StatusActive {
			t.Errorf("status = %s after a failed fix, want active", got)
		}

		b.create("sealed.test", "")
		other := New(Config{DB: db.Gorm, Vendor: b.v, Cipher: testCipher(t, 2)})
		other.now = func() time.Time { return time.Now().Add(time.Minute) }
		if _, err := other.Drift(ctx, b.v, false); !errors.Is(err, crypt.ErrDecrypt) {
			t.Errorf("Drift under another key = %v, want ErrDecrypt", err)
		}
	})
}

// A vendor event of a type nobody knows is refused; one for a site no
// license holds changes nothing; a change already in place writes no event;
// a license that cannot be read, or a rotated key that cannot be sealed,
// fails the event and changes nothing.
func TestVendorEventBranches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "l1", StatusSuspended, "s1", "K1", past)
		at := time.Now().UTC()

		if changed, err := b.s.ApplyVendorEvent(ctx, VendorEvent{ID: "e0", Type: "site.exploded", At: at, Site: Site{ID: "s1"}}); changed || !errors.Is(err, ErrUnknownEventType) {
			t.Errorf("unknown type = %v, %v; want ErrUnknownEventType", changed, err)
		}
		if changed, err := b.s.ApplyVendorEvent(ctx, VendorEvent{ID: "e1", Type: SiteSuspended, At: at, Site: Site{ID: "s-nobody"}}); changed || err != nil {
			t.Errorf("a site no license holds = %v, %v; want nothing changed", changed, err)
		}
		if changed, err := b.s.ApplyVendorEvent(ctx, VendorEvent{ID: "e2", Type: SiteSuspended, At: at, Site: Site{ID: "s1", Domain: "l1.test"}}); changed || err != nil {
			t.Errorf("suspending a suspended license = %v, %v; want nothing changed", changed, err)
		}
		if n := b.rows("license_events"); n != 0 {
			t.Errorf("%d events written for no change", n)
		}

		testdb.Inject(t, db.Gorm, "query", "licenses", nil, errInjected).Arm(1)
		if _, err := b.s.ApplyVendorEvent(ctx, VendorEvent{ID: "e3", Type: SiteDeleted, At: at, Site: Site{ID: "s1"}}); !errors.Is(err, errInjected) ||
			!strings.Contains(err.Error(), "find the license of site s1") {
			t.Errorf("an unreadable license = %v", err)
		}
		sealing := New(Config{DB: db.Gorm, Vendor: b.v, Cipher: sealFails{testCipher(t, 1)}})
		if _, err := sealing.ApplyVendorEvent(ctx, VendorEvent{ID: "e4", Type: SiteKeyRotated, At: at, Site: Site{ID: "s1", Domain: "L1.test", LicenseKey: "K-new"}}); err == nil ||
			!strings.Contains(err.Error(), "cannot seal") {
			t.Errorf("a key that cannot be sealed = %v", err)
		}
		if got := storedKey(t, db, "l1"); got != "K1" || b.status("l1") != StatusSuspended {
			t.Errorf("after the failed events: key %q, status %s; want K1, suspended", got, b.status("l1"))
		}
	})
}

// A create the vendor refused is looked for once more (a racing create may
// have made the site); when that look fails, the refusal is not taken as
// definite: the answer is the look's failure (unavailable: retry).
func TestEnsureSiteWhoseSecondLookFails(t *testing.T) {
	v := newVendor()
	v.createErr = []error{rejected}
	v.findErr = []error{nil, unavailable}
	_, _, err := EnsureSite(context.Background(), v, "A", "a.test")
	if !errors.Is(err, ErrVendorUnavailable) || errors.Is(err, ErrVendorRejected) || !strings.Contains(err.Error(), "after a refused create") {
		t.Errorf("EnsureSite = %v; want the second look's unavailability", err)
	}
	if finds, creates, _ := v.counts(); finds != 2 || creates != 1 || v.has("a.test") {
		t.Errorf("%d finds, %d creates, site %v; want 2, 1, none", finds, creates, v.has("a.test"))
	}
}

// The errors' texts: a vendor error with no cause says so, and a
// validation error says every message, by field sorted.
func TestErrorTexts(t *testing.T) {
	if got := (&UnavailableError{}).Error(); got != "vendor unavailable: no detail" {
		t.Errorf("UnavailableError{} = %q", got)
	}
	if got := (&UncertainError{}).Error(); got != "vendor outcome unknown: no detail" {
		t.Errorf("UncertainError{} = %q", got)
	}
	_, err := Validate(Input{Name: "", Domain: "http://x"})
	if err == nil || err.Error() != "invalid input: "+domainInvalid+" The name field is required." {
		t.Errorf("Validate = %v, want the fields named, sorted", err)
	}
}
