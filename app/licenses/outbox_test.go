package licenses

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/tests/testdb"
)

// stepFault fails the nth statement of any kind on any table that runs on
// a database once it is armed: walking n from 1 up fails a change between
// each pair of its statements in turn (a failed statement rolls its
// transaction back, as a process killed at that point leaves it).
type stepFault struct {
	mu    sync.Mutex
	armed bool
	n     int
	seen  int
	stmts []string
}

func injectSteps(t *testing.T, db *gorm.DB) *stepFault {
	t.Helper()
	f := &stepFault{}
	cb := func(tx *gorm.DB) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.armed {
			return
		}
		f.seen++
		f.stmts = append(f.stmts, tx.Statement.Table)
		if f.seen == f.n {
			_ = tx.AddError(errInjected)
		}
	}
	cbs := db.Callback()
	for name, err := range map[string]error{
		"create": cbs.Create().Before("gorm:create").Register("outbox:step_create", cb),
		"query":  cbs.Query().Before("gorm:query").Register("outbox:step_query", cb),
		"update": cbs.Update().Before("gorm:update").Register("outbox:step_update", cb),
		"delete": cbs.Delete().Before("gorm:delete").Register("outbox:step_delete", cb),
		"row":    cbs.Row().Before("gorm:row").Register("outbox:step_row", cb),
		"raw":    cbs.Raw().Before("gorm:raw").Register("outbox:step_raw", cb),
	} {
		if err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
	}
	return f
}

// arm fails the nth statement from now on.
func (f *stepFault) arm(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.n, f.seen, f.stmts = true, n, 0, nil
}

// disarm stops counting; fired says whether the armed statement was reached.
func (f *stepFault) disarm() (fired bool, stmts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	return f.seen >= f.n, f.stmts
}

// outboxHolds checks the outbox against the licenses: every license has
// exactly the events 1..event_sequence, each with its audit event, and the
// last one carries the license as it is (status, key, site): no change
// without its event, and no event without its change. A license marked
// revoking may show as it was before (the mark is no event of the
// consumer's: its DELETE answered for it).
func outboxHolds(t *testing.T, db *testdb.DB, log *events.Log) {
	t.Helper()
	var lics []License
	if err := db.Gorm.Find(&lics).Error; err != nil {
		t.Fatal(err)
	}
	var evs []events.Event
	if err := db.Gorm.Order("id").Find(&evs).Error; err != nil {
		t.Fatal(err)
	}
	bySubject := map[string][]events.Event{}
	for _, e := range evs {
		bySubject[e.SubjectID] = append(bySubject[e.SubjectID], e)
	}
	svc := &Service{cfg: Config{Cipher: testCipher(t, 1)}}
	for _, lic := range lics {
		got := bySubject[lic.ID]
		delete(bySubject, lic.ID)
		if lic.EventSequence == 0 || uint64(len(got)) != lic.EventSequence {
			t.Errorf("license %s (%s) at sequence %d has %d events", lic.ID, lic.Status, lic.EventSequence, len(got))
			continue
		}
		for i, e := range got {
			if e.Sequence != uint64(i+1) {
				t.Errorf("license %s: event %d has sequence %d", lic.ID, i, e.Sequence)
			}
		}
		var audited int64
		if err := db.Gorm.Model(&Event{}).Where("license_id = ? AND event IN ?", lic.ID,
			[]string{EventCreated, EventAdopted, EventReconciled, EventRevoked, EventSuspended, EventReactivated, EventKeyRotated}).
			Count(&audited).Error; err != nil {
			t.Fatal(err)
		}
		if uint64(audited) != lic.EventSequence {
			t.Errorf("license %s: %d audit events for %d consumer events", lic.ID, audited, lic.EventSequence)
		}
		body, err := log.Body(got[len(got)-1])
		if err != nil {
			t.Fatal(err)
		}
		var last struct {
			Data events.LicenseData `json:"data"`
		}
		if err := json.Unmarshal(body, &last); err != nil {
			t.Fatal(err)
		}
		if err := svc.open(&lic); err != nil {
			t.Fatal(err)
		}
		l := last.Data.License
		sameStatus := l.Status == lic.Status ||
			(lic.Status == StatusRevoking && (l.Status == StatusActive || l.Status == StatusSuspended))
		if !sameStatus || l.LicenseKey != lic.LicenseKey || l.VendorSiteID != lic.VendorSiteID || l.ID != lic.ID {
			t.Errorf("license %s is %s with key %s; its last event says %s with key %s", lic.ID, lic.Status, lic.LicenseKey, l.Status, l.LicenseKey)
		}
	}
	for subject, e := range bySubject {
		t.Errorf("%d events of %s, which is no license", len(e), subject)
	}
}

// Every change to a license, by every actor, is failed between each pair of
// its statements in turn (the nth statement fails, n = 1, 2, … until the
// change runs whole), on both databases; after each, the outbox holds: the
// change and its event both committed, or neither did.
func TestEveryChangeCommitsWithItsEvent(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type change struct {
		name  string
		setup func(b *bench, domain string) License // the license before the change (zero: none yet)
		do    func(b *bench, domain string, lic License) error
	}
	// recorded is the caller's recovery point, written in the change's
	// transaction after the change's own writes, as the idempotency layer's is.
	recorded := func(tx *gorm.DB) error {
		return tx.Exec("UPDATE consumers SET updated_at = updated_at WHERE id = ?", "c1").Error
	}
	create := func(b *bench, domain string) License {
		lic, _, err := b.s.create(ctx, "c1", Input{Name: "Shop", Domain: domain}, "", nil)
		if err != nil {
			b.t.Fatal(err)
		}
		return lic
	}
	vendorEvent := func(typ string, key string) func(b *bench, domain string, lic License) error {
		return func(b *bench, domain string, lic License) error {
			site := Site{ID: lic.VendorSiteID, Domain: domain, LicenseKey: key}
			at = at.Add(time.Second)
			_, err := b.s.apply(ctx, VendorEvent{ID: "evt_" + domain, Type: typ, At: at, Site: site})
			return err
		}
	}
	changes := []change{
		{"created by a request", nil, func(b *bench, domain string, _ License) error {
			_, _, err := b.s.create(WithActor(ctx, Actor{Name: ActorRequest}), "c1", Input{Name: "Shop", Domain: domain}, "in-"+domain, recorded)
			return err
		}},
		{"adopted", func(b *bench, domain string) License {
			b.v.mu.Lock()
			b.v.sites[domain] = Site{ID: "site-" + domain, Domain: domain, LicenseKey: "LK-" + domain, Status: StatusActive}
			b.v.mu.Unlock()
			return License{}
		}, func(b *bench, domain string, _ License) error {
			_, _, err := b.s.create(ctx, "c1", Input{Name: "Shop", Domain: domain}, "", recorded)
			return err
		}},
		{"reconciled", func(b *bench, domain string) License {
			b.v.mu.Lock()
			b.v.sites[domain] = Site{ID: "site-" + domain, Domain: domain, LicenseKey: "LK-" + domain, Status: StatusActive}
			b.v.mu.Unlock()
			return License{}
		}, func(b *bench, domain string, _ License) error {
			ctx := WithActor(ctx, Actor{Name: ActorReconciler})
			site, err := b.s.FindSite(ctx, domain)
			if err != nil {
				return err
			}
			_, _, err = b.s.record(ctx, "c1", Input{Name: "Shop", Domain: domain}, *site, EventReconciled, "", recorded)
			return err
		}},
		{"revoked by the consumer", create, func(b *bench, _ string, lic License) error {
			return b.s.revoke(ctx, "c1", lic.ID, recorded)
		}},
		{"revoked by the reconciler", func(b *bench, domain string) License {
			lic := create(b, domain)
			if err := b.db.Gorm.Model(&License{}).Where("id = ?", lic.ID).Update("status", StatusRevoking).Error; err != nil {
				b.t.Fatal(err)
			}
			return lic
		}, func(b *bench, _ string, lic License) error {
			return b.s.finishRevoke(WithActor(ctx, Actor{Name: ActorReconciler}), lic, recorded)
		}},
		{"suspended by the vendor", create, vendorEvent(SiteSuspended, "")},
		{"reactivated by the vendor", func(b *bench, domain string) License {
			lic := create(b, domain)
			if err := vendorEvent(SiteSuspended, "")(b, domain, lic); err != nil {
				b.t.Fatal(err)
			}
			return lic
		}, vendorEvent(SiteReactivated, "")},
		{"key rotated by the vendor", create, vendorEvent(SiteKeyRotated, "LK-rotated")},
		{"deleted by the vendor", create, vendorEvent(SiteDeleted, "")},
		{"key replaced by a drift fix", func(b *bench, domain string) License {
			lic := create(b, domain)
			b.v.mu.Lock()
			s := b.v.sites[domain]
			s.LicenseKey = "LK-drifted-" + domain
			b.v.sites[domain] = s
			b.v.mu.Unlock()
			return lic
		}, func(b *bench, _ string, _ License) error {
			_, err := b.s.DriftWith(ctx, b.v, DriftOptions{Fix: true, Force: true})
			return err
		}},
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		log := events.New(db.Gorm, db.Read, testCipher(t, 1))
		steps := injectSteps(t, db.Gorm)
		for i, c := range changes {
			t.Run(c.name, func(t *testing.T) {
				b.t = t
				for n := 1; ; n++ {
					if n > 40 {
						t.Fatal("the change never ran whole")
					}
					domain := fmt.Sprintf("n%d.change%d.test", n, i)
					var lic License
					if c.setup != nil {
						lic = c.setup(b, domain)
					}
					steps.arm(n)
					err := c.do(b, domain, lic)
					fired, stmts := steps.disarm()
					outboxHolds(t, db, log)
					if t.Failed() {
						t.Fatalf("statement %d failed (of %v): %v", n, stmts, err)
					}
					if !fired {
						if err != nil {
							t.Fatalf("the change ran whole and failed: %v", err)
						}
						t.Logf("failed at each of its %d statements: %v", n-1, stmts)
						return
					}
				}
			})
		}
	})
}

// A revoke's event carries the license as the revoke left it, not as it was
// read before: a key the vendor rotated while the revoke was asking it to
// delete the site (its event applied in between) is the key the
// license.revoked event carries, after the key_rotated one.
func TestRevokedEventCarriesTheLicenseAsItWasLeft(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		lic, _, err := b.s.create(ctx, "c1", Input{Name: "Shop", Domain: "a.test"}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.v.beforeDelete = func(id string) {
			ev := VendorEvent{ID: "evt_rotated", Type: SiteKeyRotated, At: time.Now(), Site: Site{ID: id, Domain: "a.test", LicenseKey: "LK-rotated"}}
			if changed, err := b.s.apply(ctx, ev); err != nil || !changed {
				t.Errorf("rotate the key mid-revoke: %v, %v", changed, err)
			}
		}
		if err := b.s.revoke(ctx, "c1", lic.ID, nil); err != nil {
			t.Fatal(err)
		}
		log := events.New(db.Gorm, db.Read, testCipher(t, 1))
		var evs []events.Event
		if err := db.Gorm.Where("subject_id = ?", lic.ID).Order("sequence").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			body, err := log.Body(e)
			if err != nil {
				t.Fatal(err)
			}
			var ev struct {
				Data events.LicenseData `json:"data"`
			}
			if err := json.Unmarshal(body, &ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d %s %s %s", e.Sequence, e.Type, ev.Data.License.Status, ev.Data.License.LicenseKey))
		}
		want := []string{"1 license.created active LK-a.test", "2 license.key_rotated revoking LK-rotated", "3 license.revoked revoked LK-rotated"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events = %q, want %q", got, want)
		}
	})
}

// A vendor event that changes nothing the consumer sees (the suspension of
// a suspended license, a rotation without a key) writes no consumer event
// and leaves the license's updated_at as it was: no change without its
// event.
func TestVendorEventWithNothingToApplyChangesNothingSeen(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		lic, _, err := b.s.create(ctx, "c1", Input{Name: "Shop", Domain: "a.test"}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Hour)
		apply := func(typ, key string) bool {
			t.Helper()
			at = at.Add(time.Second)
			changed, err := b.s.apply(ctx, VendorEvent{ID: "evt_" + typ, Type: typ, At: at, Site: Site{ID: lic.VendorSiteID, Domain: "a.test", LicenseKey: key}})
			if err != nil {
				t.Fatal(err)
			}
			return changed
		}
		if !apply(SiteSuspended, "") {
			t.Fatal("the first suspension changed nothing")
		}
		var before License
		if err := db.Gorm.Where("id = ?", lic.ID).Take(&before).Error; err != nil {
			t.Fatal(err)
		}
		b.s.cfg.Now = func() time.Time { return time.Now().Add(time.Hour) } // a later update would show
		if apply(SiteSuspended, "") || apply(SiteKeyRotated, "") {
			t.Error("an event with nothing to apply reported a change")
		}
		var after License
		if err := db.Gorm.Where("id = ?", lic.ID).Take(&after).Error; err != nil {
			t.Fatal(err)
		}
		if !after.UpdatedAt.Equal(before.UpdatedAt) || after.EventSequence != before.EventSequence {
			t.Errorf("updated_at %v → %v, sequence %d → %d; want both unchanged", before.UpdatedAt, after.UpdatedAt, before.EventSequence, after.EventSequence)
		}
		outboxHolds(t, db, events.New(db.Gorm, db.Read, testCipher(t, 1)))
	})
}
