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
	lic, created, err := b.s.create(context.Background(), "c1", Input{Name: "A", Domain: domain}, intent, nil)
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

// sealFails is a Cipher that cannot seal.
type sealFails struct{ *crypt.Cipher }

func (sealFails) Encrypt([]byte) (string, error) { return "", errors.New("injected: cannot seal") }

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
				_, _, err := b.s.create(ctx, "c1", Input{Name: "B", Domain: "b.test"}, "", nil)
				return err
			}},
			{"count licenses", func() { licenses.Arm(1) }, func() error { _, err := b.s.List(ctx, "c1", 1, 10); return err }},
			{"list licenses", func() { licenses.ArmAfter(1, 1) }, func() error { _, err := b.s.List(ctx, "c1", 1, 10); return err }},
			{"list licenses after a cursor", func() { licenses.Arm(1) }, func() error { _, err := b.s.ListCursor(ctx, "c1", nil, 10); return err }},
			{"get license", func() { licenses.Arm(1) }, func() error { _, err := b.s.Get(ctx, "c1", lic.ID); return err }},
			{"get license", func() { licenses.Arm(1) }, func() error { return b.s.revoke(ctx, "c1", lic.ID, nil) }},
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
	if _, _, err := other.create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil); !errors.Is(err, crypt.ErrDecrypt) {
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
		b.s.cfg.Now = func() time.Time { return now }
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
		other.cfg.Now = func() time.Time { return time.Now().Add(time.Minute) }
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

		if changed, err := b.s.apply(ctx, VendorEvent{ID: "e0", Type: "site.exploded", At: at, Site: Site{ID: "s1"}}); changed || !errors.Is(err, ErrUnknownEventType) {
			t.Errorf("unknown type = %v, %v; want ErrUnknownEventType", changed, err)
		}
		if changed, err := b.s.apply(ctx, VendorEvent{ID: "e1", Type: SiteSuspended, At: at, Site: Site{ID: "s-nobody"}}); changed || err != nil {
			t.Errorf("a site no license holds = %v, %v; want nothing changed", changed, err)
		}
		if changed, err := b.s.apply(ctx, VendorEvent{ID: "e2", Type: SiteSuspended, At: at, Site: Site{ID: "s1", Domain: "l1.test"}}); changed || err != nil {
			t.Errorf("suspending a suspended license = %v, %v; want nothing changed", changed, err)
		}
		if n := b.rows("license_events"); n != 0 {
			t.Errorf("%d events written for no change", n)
		}

		testdb.Inject(t, db.Gorm, "query", "licenses", nil, errInjected).Arm(1)
		if _, err := b.s.apply(ctx, VendorEvent{ID: "e3", Type: SiteDeleted, At: at, Site: Site{ID: "s1"}}); !errors.Is(err, errInjected) ||
			!strings.Contains(err.Error(), "find the license of site s1") {
			t.Errorf("an unreadable license = %v", err)
		}
		sealing := New(Config{DB: db.Gorm, Vendor: b.v, Cipher: sealFails{testCipher(t, 1)}})
		if _, err := sealing.apply(ctx, VendorEvent{ID: "e4", Type: SiteKeyRotated, At: at, Site: Site{ID: "s1", Domain: "L1.test", LicenseKey: "K-new"}}); err == nil ||
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
