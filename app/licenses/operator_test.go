package licenses

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// operatorBench is a bench with licenses of both consumers, each created a
// second after the one before: c1's acme.test, beta.example (revoked) and
// c2's acme-two.test (suspended by the vendor), müller.test, zeta.test.
type operatorBench struct {
	*bench
	ids map[string]string // domain → license id
}

func newOperatorBench(t *testing.T, db *testdb.DB) *operatorBench {
	t.Helper()
	b := &operatorBench{bench: newBench(t, db), ids: map[string]string{}}
	clock := testkit.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	b.s.cfg.Now = clock.Now
	ctx := context.Background()
	for _, l := range []struct{ consumer, domain string }{
		{"c1", "acme.test"}, {"c1", "beta.example"}, {"c2", "acme-two.test"}, {"c2", "xn--mller-kva.test"}, {"c2", "zeta.test"},
	} {
		clock.Advance(time.Second)
		lic, _, err := b.s.create(ctx, l.consumer, Input{Name: "Shop", Domain: l.domain}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.ids[l.domain] = lic.ID
	}
	clock.Advance(time.Second)
	if err := b.s.revoke(ctx, "c1", b.ids["beta.example"], nil); err != nil {
		t.Fatal(err)
	}
	ev := VendorEvent{ID: "evt_1", Type: SiteSuspended, At: clock.Now(), Site: Site{ID: b.v.sites["acme-two.test"].ID, Domain: "acme-two.test"}}
	if _, err := b.s.apply(ctx, ev); err != nil {
		t.Fatal(err)
	}
	return b
}

// domains is the page's licenses' domains, in order.
func domains(p Page) string {
	var out []string
	for _, l := range p.Licenses {
		out = append(out, l.Domain)
	}
	return strings.Join(out, ",")
}

// An operator's search: across consumers, newest first, revoked included
// unless a status says otherwise; a part of the domain matched anywhere,
// normalised as a domain is, its % and _ matching themselves; a page at a
// time; an unknown status is a validation error on status.
func TestSearch(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newOperatorBench(t, db)
		ctx := context.Background()
		for _, tt := range []struct {
			q     SearchQuery
			want  string
			total int64
		}{
			{SearchQuery{}, "zeta.test,xn--mller-kva.test,acme-two.test,beta.example,acme.test", 5},
			{SearchQuery{Domain: "  ACME "}, "acme-two.test,acme.test", 2},
			{SearchQuery{Domain: "acme", ConsumerID: "c2"}, "acme-two.test", 1},
			{SearchQuery{Domain: "cme.t"}, "acme.test", 1},
			{SearchQuery{Domain: "Müller"}, "xn--mller-kva.test", 1},
			{SearchQuery{Domain: "MÜLLER.TEST"}, "xn--mller-kva.test", 1},
			{SearchQuery{Domain: "ü ü"}, "", 0}, // no ASCII form: matches nothing, and asks nothing
			{SearchQuery{Domain: "ü%"}, "", 0},
			{SearchQuery{Domain: "a_me"}, "", 0}, // _ is no wildcard
			{SearchQuery{Domain: "%"}, "", 0},    // nor is %
			{SearchQuery{Domain: "a%e"}, "", 0},
			{SearchQuery{Domain: "!"}, "", 0}, // nor the escape character
			{SearchQuery{Domain: "a!%"}, "", 0},
			{SearchQuery{Status: StatusRevoked}, "beta.example", 1},
			{SearchQuery{Status: StatusSuspended}, "acme-two.test", 1},
			{SearchQuery{Status: StatusActive, ConsumerID: "c2"}, "zeta.test,xn--mller-kva.test", 2},
			{SearchQuery{Status: StatusRevoking}, "", 0},
			{SearchQuery{ConsumerID: "c9"}, "", 0},
			{SearchQuery{Page: 2, PerPage: 2}, "acme-two.test,beta.example", 5},
			{SearchQuery{Page: 3, PerPage: 2}, "acme.test", 5},
			{SearchQuery{Page: 4, PerPage: 2}, "", 5},
			{SearchQuery{Domain: "test", Page: 1, PerPage: 1}, "zeta.test", 4},
		} {
			p, err := b.s.Search(ctx, tt.q)
			if err != nil || domains(p) != tt.want || p.Total != tt.total {
				t.Errorf("Search(%+v) = %q (total %d), %v; want %q (total %d)", tt.q, domains(p), p.Total, err, tt.want, tt.total)
			}
			for _, l := range p.Licenses {
				if l.LicenseKey != "" {
					t.Errorf("%s: key %q: a search reads no key (the operator's list shows none)", l.Domain, l.LicenseKey)
				}
			}
		}
		_, err := b.s.Search(ctx, SearchQuery{Status: "deleted"})
		var verr *ValidationError
		if !errors.As(err, &verr) || len(verr.Fields["status"]) != 1 || len(verr.Fields) != 1 {
			t.Errorf("Search with an unknown status = %v, want a validation error on status", err)
		}
		if p, err := b.s.Search(ctx, SearchQuery{PerPage: 0}); err != nil || len(p.Licenses) != 5 {
			t.Errorf("Search with no page size = %d licenses, %v; want a page of %d", len(p.Licenses), err, DefaultPerPage)
		}
	})
}

// Any consumer's license by its id, its key opened; an unknown id is
// ErrNotFound. Its audit trail is Events with its own consumer: that is all
// an operator needs, and no other consumer's id reads it.
func TestFindAndItsTrail(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newOperatorBench(t, db)
		ctx := context.Background()
		lic, err := b.s.Find(ctx, b.ids["beta.example"])
		if err != nil || lic.ConsumerID != "c1" || lic.Domain != "beta.example" || lic.Status != StatusRevoked ||
			lic.LicenseKey != "LK-beta.example" || lic.KeyUnavailable {
			t.Fatalf("Find = %+v, %v", lic, err)
		}
		if _, err := b.s.Find(ctx, "01NOSUCHLICENSE00000000000"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find(unknown) = %v, want ErrNotFound", err)
		}
		events, err := b.s.Events(ctx, lic.ConsumerID, lic.ID)
		if err != nil || len(events) != 2 || events[0].Event != EventCreated || events[1].Event != EventRevoked {
			t.Errorf("Events of the found license = %+v, %v; want created, revoked", events, err)
		}
		if _, err := b.s.Events(ctx, "c2", lic.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Events under another consumer = %v, want ErrNotFound", err)
		}
	})
}

// Under keys that open no license's key, the operator's reads still show
// every license: a search reads no key at all, and Find shows the license
// without its key, marked so, and says so at Warn; a consumer's own list
// fails as before (503 key_unavailable).
func TestOperatorReadsShowLicensesWhoseKeyNoKeyOpens(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newOperatorBench(t, db)
		ctx := context.Background()
		log := &testkit.Buffer{}
		other := New(Config{DB: db.Gorm, Read: db.Read, Vendor: b.v, Cipher: testCipher(t, 2), Log: slog.New(slog.NewTextHandler(log, nil))})
		p, err := other.Search(ctx, SearchQuery{})
		if err != nil || len(p.Licenses) != 5 {
			t.Fatalf("Search under other keys = %d licenses, %v; want every one", len(p.Licenses), err)
		}
		for _, l := range p.Licenses {
			if l.LicenseKey != "" {
				t.Errorf("%s: key %q; want none", l.Domain, l.LicenseKey)
			}
		}
		lic, err := other.Find(ctx, b.ids["zeta.test"])
		if err != nil || lic.LicenseKey != "" || !lic.KeyUnavailable || lic.Domain != "zeta.test" {
			t.Errorf("Find under other keys = %+v, %v", lic, err)
		}
		if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), b.ids["zeta.test"]) || strings.Contains(log.String(), "LK-") {
			t.Errorf("log = %s, want a warning naming the license, never its key", log.String())
		}
		if _, err := other.List(ctx, "c2", 1, 10); err == nil {
			t.Error("a consumer's list under other keys did not fail")
		}
	})
}

// The operator's reads fail with the database's error, saying which.
func TestOperatorReadFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newOperatorBench(t, db)
		ctx := context.Background()
		q := testdb.Inject(t, db.Gorm, "query", "licenses", nil, errInjected)
		for says, call := range map[string]func() error{
			"count licenses":  func() error { _, err := b.s.Search(ctx, SearchQuery{}); return err },
			"search licenses": func() error { _, err := b.s.Search(ctx, SearchQuery{}); return err },
			"find license":    func() error { _, err := b.s.Find(ctx, b.ids["acme.test"]); return err },
		} {
			if says == "search licenses" {
				q.ArmAfter(1, 1)
			} else {
				q.Arm(1)
			}
			if err := call(); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), says) {
				t.Errorf("%s: %v, want the injected failure, said so", says, err)
			}
			q.Disarm()
		}
	})
}
