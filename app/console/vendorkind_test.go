package console

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// vendorEnv is the intents fixture's environment with extra settings.
func vendorEnv(f *intentsFixture, extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		return f.env(k)
	}
}

// recordOf reads an intent's status and attempts.
func recordOf(t *testing.T, db *testdb.DB, id string) (string, int) {
	t.Helper()
	var r idempotency.Record
	if err := db.Gorm.Where("public_id = ?", id).Take(&r).Error; err != nil {
		t.Fatal(err)
	}
	return r.Status, r.Attempts
}

func vendorKindOf(t *testing.T, db *testdb.DB) (driver, host string, httpUntil *time.Time) {
	t.Helper()
	row := db.Gorm.Raw("SELECT driver, host, http_until FROM vendor_kind WHERE id = 1").Row()
	if err := row.Scan(&driver, &host, &httpUntil); err != nil {
		t.Fatal(err)
	}
	return driver, host, httpUntil
}

// A database the http driver works with refuses a reconcile run with the
// fake (a shell without the server's vendor settings): exit 1, a message
// naming both drivers, and the due pending intent untouched. With
// --vendor-change the fake is recorded, and it still leaves the intent the
// http driver made alone (and drift refuses to compare).
func TestReconcileWithFakeRefusedOnHTTPDatabase(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		past := time.Now().Add(-time.Minute).UTC()
		if err := db.Gorm.Model(&idempotency.Record{}).Where("public_id = ?", f.pending).Update("locked_until", past).Error; err != nil {
			t.Fatal(err)
		}
		httpKind := database.VendorKind{Driver: database.VendorHTTP, Host: "vendor.example"}
		if _, err := database.BindVendor(context.Background(), db.Gorm, httpKind, false, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		statusBefore, attemptsBefore := recordOf(t, db, f.pending)

		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), []string{"reconcile"}, f.env, &stdout, &stderr)
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "VENDOR_DRIVER=http") || !strings.Contains(err.Error(), "VENDOR_DRIVER=fake") ||
			!strings.Contains(err.Error(), "--vendor-change") {
			t.Fatalf("reconcile with the fake on an http database = %v (exit %d), want exit 1 naming both drivers and --vendor-change", err, ExitCode(err))
		}
		if s, n := recordOf(t, db, f.pending); s != statusBefore || n != attemptsBefore || strings.Contains(stderr.String(), "msg=reconciled") {
			t.Fatalf("the refused reconcile touched the intent: %s/%d, was %s/%d\n%s", s, n, statusBefore, attemptsBefore, stderr.String())
		}
		if d, _, _ := vendorKindOf(t, db); d != database.VendorHTTP {
			t.Fatalf("the refusal recorded %q", d)
		}

		stdout.Reset()
		stderr.Reset()
		if err := Run(context.Background(), []string{"reconcile", "--vendor-change"}, f.env, &stdout, &stderr); err != nil {
			t.Fatalf("reconcile --vendor-change: %v\n%s", err, stderr.String())
		}
		if d, h, until := vendorKindOf(t, db); d != database.VendorFake || h != "" || until == nil {
			t.Errorf("after --vendor-change: driver %q host %q http_until %v; want fake, no host, the time of the change", d, h, until)
		}
		if !strings.Contains(stderr.String(), `msg="vendor driver changed (--vendor-change)`) || !strings.Contains(stderr.String(), "from=http") {
			t.Errorf("the change is not logged:\n%s", stderr.String())
		}
		if s, n := recordOf(t, db, f.pending); s != statusBefore || n != attemptsBefore || !strings.Contains(stdout.String(), "0 pending intent(s) worked") {
			t.Errorf("the fake settled an intent the http driver made: %s/%d, was %s/%d\n%s", s, n, statusBefore, attemptsBefore, stdout.String())
		}
		if err := Run(context.Background(), []string{"drift"}, f.env, &bytes.Buffer{}, &bytes.Buffer{}); ExitCode(err) != 1 ||
			!strings.Contains(err.Error(), "http driver") {
			t.Errorf("drift with the fake after the http driver = %v, want refused", err)
		}
		// Now the fake's: its own run goes on without the flag.
		if err := Run(context.Background(), []string{"reconcile"}, f.env, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Errorf("reconcile with the recorded fake: %v", err)
		}
	})
}

// A changed VENDOR_URL of the same driver is the vendor having moved: the
// command runs, the new host is recorded, and the move is logged once, with
// the hosts only (never the URL's user info or the token).
func TestVendorURLChangeLoggedOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		env := vendorEnv(f, map[string]string{"VENDOR_DRIVER": "http", "VENDOR_URL": "http://ops:tok-SEKRIT@127.0.0.1:1/api",
			"VENDOR_TOKEN": "tok-SEKRIT", "VENDOR_RETRY_ATTEMPTS": "0"})
		if err := Run(context.Background(), []string{"reconcile"}, env, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Fatalf("first reconcile: %v", err)
		}
		if d, h, _ := vendorKindOf(t, db); d != database.VendorHTTP || h != "127.0.0.1:1" {
			t.Fatalf("first run recorded %q %q, want http 127.0.0.1:1", d, h)
		}
		moved := vendorEnv(f, map[string]string{"VENDOR_DRIVER": "http", "VENDOR_URL": "http://ops:tok-SEKRIT@127.0.0.1:2/api",
			"VENDOR_TOKEN": "tok-SEKRIT", "VENDOR_RETRY_ATTEMPTS": "0"})
		var logs strings.Builder
		for range 2 {
			var stderr bytes.Buffer
			if err := Run(context.Background(), []string{"reconcile"}, moved, &bytes.Buffer{}, &stderr); err != nil {
				t.Fatalf("reconcile after the move: %v\n%s", err, stderr.String())
			}
			logs.WriteString(stderr.String())
		}
		if n := strings.Count(logs.String(), `msg="vendor moved`); n != 1 {
			t.Errorf("the move was logged %d times, want once:\n%s", n, logs.String())
		}
		if line := lineWith(logs.String(), "vendor moved"); !strings.Contains(line, "from_host=127.0.0.1:1") || !strings.Contains(line, "to_host=127.0.0.1:2") {
			t.Errorf("the move's line lacks the hosts: %s", line)
		}
		if strings.Contains(logs.String(), "SEKRIT") {
			t.Errorf("a log line holds the vendor's token:\n%s", logs.String())
		}
		if _, h, _ := vendorKindOf(t, db); h != "127.0.0.1:2" {
			t.Errorf("recorded host %q, want 127.0.0.1:2", h)
		}
	})
}
