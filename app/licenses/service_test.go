package licenses

import (
	"context"
	"testing"
	"time"

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
	if _, _, err := s.create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil); err != nil {
		t.Fatal(err)
	}
	if v.deadline.IsZero() || v.deadline.After(parent) {
		t.Errorf("vendor call deadline %v, want no later than the caller's %v", v.deadline, parent)
	}
}
