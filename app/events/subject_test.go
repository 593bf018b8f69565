package events

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/tests/testdb"
)

func cipherOf(t *testing.T, b byte) *crypt.Cipher {
	t.Helper()
	c, err := crypt.New(bytes.Repeat([]byte{b}, crypt.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// appendAll appends the drafts, each in a transaction of its own, as
// changes do.
func appendAll(t *testing.T, db *gorm.DB, l *Log, drafts ...Draft) {
	t.Helper()
	for _, d := range drafts {
		if err := db.Transaction(func(tx *gorm.DB) error { return l.Append(tx, d) }); err != nil {
			t.Fatal(err)
		}
	}
}

// One license's events, for an operator: the consumer's events of that
// subject only, oldest first (by sequence), dispatched or not, each with
// the body the feed shows and the license it carries; at most limit; an
// event no key opens is listed, marked, rather than failing the read.
func TestForSubject(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := New(db.Gorm, db.Read, cipherOf(t, 1))
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		lic := func(id, status, key string) LicenseData {
			return LicenseData{License: License{ID: id, Name: "Shop", Domain: id + ".test", LicenseKey: key, Status: status,
				VendorSiteID: "s-" + id, CreatedAt: Time(at), UpdatedAt: Time(at)}}
		}
		appendAll(t, db.Gorm, l,
			Draft{ConsumerID: "c1", Type: LicenseCreated, SubjectID: "L1", Sequence: 1, Data: lic("L1", "active", "LK-1"), At: at},
			Draft{ConsumerID: "c1", Type: LicenseCreated, SubjectID: "L2", Sequence: 1, Data: lic("L2", "active", "LK-2"), At: at},
			Draft{ConsumerID: "c1", Type: LicenseKeyRotated, SubjectID: "L1", Sequence: 2, Data: lic("L1", "active", "LK-1b"), At: at.Add(time.Second)},
			Draft{ConsumerID: "c2", Type: LicenseCreated, SubjectID: "L1", Sequence: 1, Data: lic("L1", "active", "LK-other"), At: at},
			Draft{ConsumerID: "c1", Type: EndpointDisabled, SubjectID: "E1", Sequence: 1, Data: map[string]any{"webhook_endpoint": map[string]any{"id": "E1"}}, At: at},
			Draft{ConsumerID: "c1", Type: LicenseRevoked, SubjectID: "L1", Sequence: 3, Data: lic("L1", "revoked", "LK-1b"), At: at.Add(2 * time.Second)},
		)
		// The first two are in the feed.
		if err := db.Gorm.Exec("UPDATE consumer_events SET position = id WHERE id <= 2").Error; err != nil {
			t.Fatal(err)
		}
		got, err := l.ForSubject(ctx, "c1", "L1", 10)
		if err != nil || len(got) != 3 {
			t.Fatalf("ForSubject(c1, L1) = %+v, %v; want 3 events", got, err)
		}
		for i, want := range []struct {
			typ        string
			dispatched bool
		}{{LicenseCreated, true}, {LicenseKeyRotated, false}, {LicenseRevoked, false}} {
			e := got[i]
			if e.Type != want.typ || e.Sequence != uint64(i+1) || e.SubjectID != "L1" || (e.Position != nil) != want.dispatched {
				t.Errorf("event %d = %+v, want %s", i, e, want.typ)
			}
			if e.Data != "" {
				t.Errorf("event %d carries its sealed data: an operator's page shows none of it", i)
			}
		}
		if !got[2].CreatedAt.Equal(at.Add(2 * time.Second)) {
			t.Errorf("created_at = %v", got[2].CreatedAt)
		}
		if two, err := l.ForSubject(ctx, "c1", "L1", 2); err != nil || len(two) != 2 || two[1].Sequence != 2 {
			t.Errorf("ForSubject with limit 2 = %+v, %v; want the first two", two, err)
		}
		if other, err := l.ForSubject(ctx, "c2", "L1", 10); err != nil || len(other) != 1 || other[0].ConsumerID != "c2" {
			t.Errorf("ForSubject(c2, L1) = %+v, %v; want c2's one", other, err)
		}
		if none, err := l.ForSubject(ctx, "c1", "L9", 10); err != nil || len(none) != 0 {
			t.Errorf("ForSubject(unknown) = %+v, %v; want none", none, err)
		}
		if ep, err := l.ForSubject(ctx, "c1", "E1", 10); err != nil || len(ep) != 1 || ep[0].Type != EndpointDisabled {
			t.Errorf("ForSubject(endpoint) = %+v, %v; want its event", ep, err)
		}
		if _, err := l.ForSubject(ctx, "", "L1", 10); !errors.Is(err, ErrNoConsumer) {
			t.Errorf("ForSubject without a consumer = %v, want ErrNoConsumer", err)
		}

		// Its data is not opened: under keys that open none of it, every event is listed.
		other := New(db.Gorm, db.Read, cipherOf(t, 2))
		if sealed, err := other.ForSubject(ctx, "c1", "L1", 10); err != nil || len(sealed) != 3 {
			t.Fatalf("ForSubject under other keys = %+v, %v; want every event", sealed, err)
		}

		fault := testdb.Inject(t, db.Read, "query", Event{}.TableName(), nil, errors.New("injected"))
		fault.Arm(1)
		if _, err := l.ForSubject(ctx, "c1", "L1", 10); err == nil || !strings.Contains(err.Error(), "list the events of L1") {
			t.Errorf("ForSubject with the read failing = %v", err)
		}
	})
}
