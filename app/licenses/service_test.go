package licenses

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/tests/testdb"
)

// deadlineVendor records the deadline of the call it gets.
type deadlineVendor struct{ deadline time.Time }

func (v *deadlineVendor) FindSite(ctx context.Context, _ string) (*Site, error) {
	v.deadline, _ = ctx.Deadline()
	return &Site{ID: "s1", LicenseKey: "LK"}, nil
}
func (v *deadlineVendor) CreateSite(context.Context, string, string) (Site, error) {
	return Site{}, nil
}
func (v *deadlineVendor) DeleteSite(context.Context, string) error        { return nil }
func (v *deadlineVendor) RotateKey(context.Context, string) (Site, error) { return Site{}, nil }

// The work never outlives the caller's deadline (what is left of the
// idempotency lease's work budget).
func TestCreateKeepsAnEarlierCallerDeadline(t *testing.T) {
	db := testdb.New(t, "sqlite")
	if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'c1', ?, ?)", time.Now().UTC(), time.Now().UTC()).Error; err != nil {
		t.Fatal(err)
	}
	v := &deadlineVendor{}
	s := New(Config{DB: db.Gorm, Vendor: v, Cipher: testCipher(t, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	parent, _ := ctx.Deadline()
	if _, _, err := s.Create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, Steps{}); err != nil {
		t.Fatal(err)
	}
	if v.deadline.IsZero() || v.deadline.After(parent) {
		t.Errorf("vendor call deadline %v, want no later than the caller's %v", v.deadline, parent)
	}
}

// ObserveCreated is told once for each license made, after its row
// committed: a create, and a pending create resumed; not for a domain the
// consumer already held, another's domain, nor a change its caller refused.
func TestObserveCreatedCountsLicensesMade(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		var made atomic.Int64
		b.s = New(Config{DB: db.Gorm, Vendor: b.v, Cipher: testCipher(t, 1), ObserveCreated: func() { made.Add(1) }})
		ctx := context.Background()
		b.create("a.test", "")
		if _, created, err := b.s.Create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, Steps{}); err != nil || created {
			t.Fatalf("the held domain again = %v, %v", created, err)
		}
		if _, _, err := b.s.Create(ctx, "c2", Input{Name: "A", Domain: "a.test"}, Steps{}); !errors.Is(err, ErrDomainTaken) {
			t.Fatalf("another's domain = %v", err)
		}
		refused := Steps{Commit: func(*gorm.DB, License, bool) error { return refusal{} }}
		if _, _, err := b.s.Create(ctx, "c1", Input{Name: "A", Domain: "refused.test"}, refused); err == nil {
			t.Fatal("a create its caller refused succeeded")
		}
		if n := made.Load(); n != 1 {
			t.Fatalf("ObserveCreated told %d times, want 1 (the one license made)", n)
		}
		if _, created, found, err := b.s.Resume(ctx, "c1", Input{Name: "B", Domain: "b.test"}, true, Steps{IntentID: "intent-b"}); err != nil || !created || !found {
			t.Fatalf("Resume = created %v, found %v, %v", created, found, err)
		}
		if n := made.Load(); n != 2 {
			t.Errorf("ObserveCreated told %d times after a resumed create, want 2", n)
		}
	})
}
