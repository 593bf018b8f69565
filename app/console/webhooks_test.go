package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/tests/testdb"
)

// webhooksFixture is a migrated database with acme's endpoint (one failed
// delivery, its attempt) and globex's disabled endpoint.
type webhooksFixture struct {
	t                *testing.T
	db               *testdb.DB
	env              func(string) string
	acme, globex     webhooks.Endpoint
	secret, delivery string
	printed          strings.Builder
}

func newWebhooksFixture(t *testing.T, db *testdb.DB) *webhooksFixture {
	t.Chdir(t.TempDir())
	env := dbEnv(db, map[string]string{"APP_KEY": testKey})
	f := &webhooksFixture{t: t, db: db, env: env}
	ctx := context.Background()
	svc := auth.New(auth.Config{DB: db.Gorm, Key: []byte("0123456789abcdef0123456789abcdef"), Issuer: "http://localhost", DefaultTTL: time.Hour})
	var consumers []string
	for _, name := range []string{"acme", "globex"} {
		issued, err := svc.Issue(ctx, audit.Console(), auth.IssueInput{Consumer: name, Abilities: []string{"webhooks:manage"}})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, issued.ConsumerID)
	}
	cipher, err := crypt.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	log := events.New(db.Gorm, nil, cipher)
	hooks := webhooks.New(webhooks.Config{DB: db.Gorm, Events: log, Cipher: cipher, Policy: webhooks.Policy{AllowPrivate: true}})
	if f.acme, f.secret, err = hooks.CreateEndpoint(ctx, consumers[0], webhooks.EndpointInput{URL: "http://127.0.0.1:1/acme"}); err != nil {
		t.Fatal(err)
	}
	if f.globex, _, err = hooks.CreateEndpoint(ctx, consumers[1], webhooks.EndpointInput{URL: "http://127.0.0.1:1/globex"}); err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := hooks.UpdateEndpoint(ctx, consumers[1], f.globex.ID, webhooks.EndpointPatch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	err = db.Gorm.Transaction(func(tx *gorm.DB) error {
		return log.Append(tx, events.Draft{ConsumerID: consumers[0], Type: events.LicenseCreated, SubjectID: "01JLICENSE0000000000000000",
			Sequence: 1, Data: map[string]any{"license": map[string]any{"license_key": "KEY-MARKER-5e1f"}}, At: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hooks.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	var d webhooks.Delivery
	if err := db.Gorm.Where("endpoint_id = ?", f.acme.ID).Take(&d).Error; err != nil {
		t.Fatal(err)
	}
	f.delivery = d.ID
	status, reason := 500, webhooks.FailureHTTPStatus
	if err := db.Gorm.Create(&webhooks.Attempt{DeliveryID: d.ID, AttemptedAt: time.Now().UTC(), ResponseStatus: &status, DurationMS: 12, Error: &reason}).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Model(&d).Updates(map[string]any{"status": webhooks.StatusFailed, "attempts": 1, "last_status": 500, "next_attempt_at": nil}).Error; err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs `licensor webhooks args…`, keeping what it printed.
func (f *webhooksFixture) run(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = Run(context.Background(), append([]string{"webhooks"}, args...), f.env, &out, &errOut)
	f.printed.WriteString(out.String() + errOut.String())
	return out.String(), errOut.String(), err
}

// The operator lists every consumer's endpoints or one's, as a table or
// JSON, with why one is disabled; never a secret nor an event's data.
func TestWebhooksList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newWebhooksFixture(t, db)
		out, _, err := f.run("list")
		if err != nil || !strings.Contains(out, f.acme.ID) || !strings.Contains(out, f.globex.ID) || !strings.Contains(out, `"disabled by the consumer"`) {
			t.Fatalf("list = %v\n%s", err, out)
		}
		out, _, err = f.run("list", "--consumer", "acme", "--json")
		var views []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &views) != nil || len(views) != 1 {
			t.Fatalf("list --consumer acme --json = %v\n%s", err, out)
		}
		if v := views[0]; v["id"] != f.acme.ID || v["consumer"] != "acme" || v["enabled"] != true || v["url"] != "http://127.0.0.1:1/acme" {
			t.Errorf("acme's endpoint = %v", v)
		}
		out, stderr, err := f.run("list", "--consumer", "nobody")
		if err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(stderr, `no consumer is named "nobody"`) {
			t.Errorf("an unknown consumer: %v, %q, %q; want the header only and a note", err, out, stderr)
		}
		for _, s := range []string{f.secret, webhooks.SecretPrefix, "KEY-MARKER-5e1f"} {
			if strings.Contains(f.printed.String(), s) {
				t.Errorf("the output shows %q", s)
			}
		}
	})
}

// An endpoint's deliveries, with their attempts; filters and mistakes.
func TestWebhooksDeliveries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newWebhooksFixture(t, db)
		out, _, err := f.run("deliveries", f.acme.ID, "--json")
		var views []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &views) != nil || len(views) != 1 {
			t.Fatalf("deliveries --json = %v\n%s", err, out)
		}
		v := views[0]
		attempts, _ := v["attempts"].([]any)
		if v["id"] != f.delivery || v["status"] != "failed" || v["event_type"] != events.LicenseCreated || len(attempts) != 1 ||
			attempts[0].(map[string]any)["response_status"] != float64(500) || attempts[0].(map[string]any)["error"] != webhooks.FailureHTTPStatus {
			t.Errorf("delivery = %v", v)
		}
		out, _, err = f.run("deliveries", "--status", "failed", f.acme.ID)
		if err != nil || !strings.Contains(out, f.delivery) || !strings.Contains(out, `"`+webhooks.FailureHTTPStatus+`"`) {
			t.Errorf("deliveries --status failed = %v\n%s", err, out)
		}
		if out, _, err := f.run("deliveries", f.acme.ID, "--status", "delivered"); err != nil || strings.Contains(out, f.delivery) {
			t.Errorf("deliveries --status delivered = %v\n%s", err, out)
		}
		if _, _, err := f.run("deliveries", "01NOSUCHENDPOINT0000000000"); ExitCode(err) != 1 || !errors.Is(err, webhooks.ErrNotFound) {
			t.Errorf("an unknown endpoint: %v (exit %d), want not found, exit 1", err, ExitCode(err))
		}
		for _, args := range [][]string{{"deliveries"}, {"deliveries", f.acme.ID, "--status", "lost"}, {"deliveries", "a", "b"}} {
			if _, _, err := f.run(args...); ExitCode(err) != 2 {
				t.Errorf("webhooks %q: %v, want exit 2", args, err)
			}
		}
		if strings.Contains(f.printed.String(), "KEY-MARKER-5e1f") {
			t.Error("the output shows the event's data")
		}
	})
}

// A retry makes the delivery due now with a new window, in the audit trail
// as the console's; one a worker holds is refused, exit 1.
func TestWebhooksRetry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newWebhooksFixture(t, db)
		_, stderr, err := f.run("retry", f.delivery)
		if err != nil || !strings.Contains(stderr, "is due now") {
			t.Fatalf("retry = %v, %q", err, stderr)
		}
		var d webhooks.Delivery
		if err := db.Gorm.Where("id = ?", f.delivery).Take(&d).Error; err != nil {
			t.Fatal(err)
		}
		if d.Status != webhooks.StatusPending || d.NextAttemptAt == nil || time.Since(d.WindowStart) > time.Minute {
			t.Errorf("after retry: %+v, want pending, due, a new window", d)
		}
		var trail []audit.Event
		if err := db.Gorm.Where("subject_type = ? AND subject_id = ?", audit.SubjectWebhookDelivery, f.delivery).Find(&trail).Error; err != nil {
			t.Fatal(err)
		}
		if len(trail) != 1 || trail[0].Event != audit.WebhookDeliveryRetried || trail[0].Actor != audit.ActorConsole {
			t.Errorf("audit trail %+v, want one webhook_delivery.retried by the console", trail)
		}
		// A claim whose lease has not lapsed: a worker is sending it.
		if err := db.Gorm.Model(&d).Updates(map[string]any{"claim": "01CLAIM0000000000000000000", "next_attempt_at": time.Now().Add(time.Hour)}).Error; err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.run("retry", f.delivery); ExitCode(err) != 1 || !errors.Is(err, webhooks.ErrInFlight) {
			t.Errorf("retry of a claimed delivery: %v, want ErrInFlight, exit 1", err)
		}
		if _, _, err := f.run("retry", "01NOSUCHDELIVERY0000000000"); ExitCode(err) != 1 || !errors.Is(err, webhooks.ErrNotFound) {
			t.Errorf("retry of an unknown delivery: %v, want not found, exit 1", err)
		}
		if _, _, err := f.run("retry"); ExitCode(err) != 2 {
			t.Errorf("retry without an id: %v, want exit 2", err)
		}
	})
}
