package webhooks

import (
	"bytes"
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorsim"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rig is a database with the licenses service, the events log and the
// webhooks service on it, all on one clock.
type rig struct {
	t        testing.TB
	db       *testdb.DB
	clock    *testkit.Clock
	cipher   *crypt.Cipher
	events   *events.Log
	licenses *licenses.Service
	hooks    *Service
	cfg      Config // hooks' (another worker: New(r.cfg) with changes)
}

func newRig(t testing.TB, db *testdb.DB, cfg Config) *rig {
	t.Helper()
	cipher, err := crypt.New(bytes.Repeat([]byte{7}, crypt.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	clock := testkit.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	log := events.New(db.Gorm, db.Read, cipher)
	sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vendor := vendorclient.NewInProcess(sim, config.Vendor{}, nil) // the fake vendor
	r := &rig{t: t, db: db, clock: clock, cipher: cipher, events: log}
	r.licenses = licenses.New(licenses.Config{DB: db.Gorm, Read: db.Read, Vendor: vendor, Cipher: cipher, Now: clock.Now, Events: log,
		Retry: database.RetryOnConflict})
	cfg.DB, cfg.Read, cfg.Events, cfg.Cipher, cfg.Now = db.Gorm, db.Read, log, cipher, clock.Now
	if cfg.Retry == nil {
		cfg.Retry = database.RetryOnConflict
	}
	cfg.Policy.AllowPrivate = true
	r.cfg = cfg
	r.hooks = New(cfg)
	return r
}

// consumer adds a consumer row.
func (r *rig) consumer(id string) string {
	r.t.Helper()
	now := time.Now().UTC()
	if err := r.db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", id, id, now, now).Error; err != nil {
		r.t.Fatal(err)
	}
	return id
}

// license creates a license for the consumer, from the licenses service's
// writes as the create operation makes them (its license.created event).
func (r *rig) license(consumerID, domain string) licenses.License {
	r.t.Helper()
	ctx, in := context.Background(), licenses.Input{Name: "Shop", Domain: domain}
	site, _, err := r.licenses.EnsureSite(ctx, in)
	if err != nil {
		r.t.Fatal(err)
	}
	n, err := r.licenses.Draft(ctx, consumerID, in, site, licenses.EventCreated, "")
	if err == nil {
		err = r.db.Gorm.Transaction(func(tx *gorm.DB) error { return r.licenses.Insert(tx, n) })
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return n.License
}

// revoke revokes the consumer's license as the revoke operation does (its
// license.revoked event).
func (r *rig) revoke(consumerID, id string) error {
	ctx := context.Background()
	lic, err := r.licenses.Revocable(ctx, consumerID, id)
	if err != nil {
		return err
	}
	if err := r.licenses.DeleteSite(ctx, lic); err != nil {
		return err
	}
	return r.db.Gorm.Transaction(func(tx *gorm.DB) error {
		_, err := r.licenses.Revoked(ctx, tx, lic)
		return err
	})
}

// endpoint registers an endpoint for the consumer.
func (r *rig) endpoint(consumerID, url string, types ...string) Endpoint {
	r.t.Helper()
	if len(types) == 0 {
		types = nil
	}
	e, _, err := r.hooks.CreateEndpoint(context.Background(), consumerID, EndpointInput{URL: url, Events: types})
	if err != nil {
		r.t.Fatal(err)
	}
	return e
}

// dispatch runs the dispatcher once.
func (r *rig) dispatch() int {
	r.t.Helper()
	n, err := r.hooks.Dispatch(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}
