package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/dbtime"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/tests/testdb"
)

// What the seeded intents hold that no output may show.
const (
	seededKey      = "raw-key-SEKRIT-7f3a9c"
	seededBody     = `{"name":"Acme","domain":"BODY-MARKER-91c2.test"}`
	seededResponse = `{"data":{"id":"RESPONSE-MARKER-44d1"}}`
)

// intentsFixture is a migrated database holding three intents of two
// consumers, and every byte the commands run on it have printed.
type intentsFixture struct {
	t                          *testing.T
	db                         *testdb.DB
	env                        func(string) string
	secret                     string // acme's token
	token                      string // acme's token id
	failed, pending, completed string
	printed                    strings.Builder
}

// newIntentsFixture seeds, oldest first: acme's failed intent (a key the
// server made, 3h old), acme's pending one (2h old) and globex's completed
// one (5m old).
func newIntentsFixture(t *testing.T, db *testdb.DB) *intentsFixture {
	t.Chdir(t.TempDir())
	env := dbEnv(db, map[string]string{"APP_KEY": testKey})
	f := &intentsFixture{t: t, db: db, env: env}
	svc := auth.New(auth.Config{DB: db.Gorm, Key: []byte("0123456789abcdef0123456789abcdef"), Issuer: "http://localhost", DefaultTTL: time.Hour})
	acme := f.issue(svc, "acme")
	f.secret, f.token = acme.Secret, acme.ID
	globex := f.issue(svc, "globex")

	now := dbtime.Now()
	due, status := now.Add(time.Minute), 201
	headers := `{"Location":"/api/licenses/L1"}`
	f.failed = f.seed(idempotency.Record{ConsumerID: acme.ConsumerID, Key: "auto:0f1e2d3c", Status: idempotency.StatusFailed,
		Attempts: 5, LockedUntil: &due, CreatedAt: now.Add(-3 * time.Hour)})
	f.pending = f.seed(idempotency.Record{ConsumerID: acme.ConsumerID, Key: seededKey, Status: idempotency.StatusPending,
		Attempts: 2, LockedUntil: &due, CreatedAt: now.Add(-2 * time.Hour), RequestBody: []byte(seededBody),
		ExternalRef: new("acme.test"), CorrelationID: new("req-0001"), RequestedBy: new(acme.ID)})
	f.completed = f.seed(idempotency.Record{ConsumerID: globex.ConsumerID, Key: "globex-key-1", Status: idempotency.StatusCompleted,
		Attempts: 1, CreatedAt: now.Add(-5 * time.Minute), ResponseStatus: &status, ResponseHeaders: &headers,
		ResponseBody: []byte(seededResponse), ResourceType: new("license"), ResourceID: new("L1")})
	return f
}

func (f *intentsFixture) issue(svc *auth.Service, consumer string) auth.Issued {
	f.t.Helper()
	issued, err := svc.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: consumer, Abilities: []string{"licenses:read"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return issued
}

// seed writes r with the fields every record needs and returns its id.
func (f *intentsFixture) seed(r idempotency.Record) string {
	f.t.Helper()
	r.Operation, r.RequestHash = "licenses.store", "h"
	r.UpdatedAt, r.ExpiresAt = r.CreatedAt, r.CreatedAt.Add(48*time.Hour)
	if err := f.db.Gorm.Create(&r).Error; err != nil {
		f.t.Fatal(err)
	}
	return ptr.Deref(r.PublicID)
}

// run runs `licensor intents args…`, keeping what it printed.
func (f *intentsFixture) run(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = Run(context.Background(), append([]string{"intents"}, args...), f.env, &out, &errOut)
	f.printed.WriteString(out.String() + errOut.String())
	return out.String(), errOut.String(), err
}

// runAny runs `licensor args…` on the fixture's database; it returns what
// went to stderr.
func (f *intentsFixture) runAny(args ...string) (stderr string, err error) {
	var out, errOut bytes.Buffer
	err = Run(context.Background(), args, f.env, &out, &errOut)
	return errOut.String(), err
}

// rows runs a list and returns the ids of its table's rows.
func (f *intentsFixture) rows(args ...string) []string {
	f.t.Helper()
	stdout, stderr, err := f.run(append([]string{"list"}, args...)...)
	if err != nil {
		f.t.Fatalf("intents list %q: %v\n%s", args, err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if !strings.HasPrefix(lines[0], "ID ") {
		f.t.Fatalf("list %q has no header:\n%s", args, stdout)
	}
	ids := []string{}
	for _, l := range lines[1:] {
		ids = append(ids, strings.Fields(l)[0])
	}
	return ids
}

// noSecrets fails the test if any output showed a raw key, a stored body
// or a token.
func (f *intentsFixture) noSecrets() {
	f.t.Helper()
	for _, s := range []string{seededKey, "auto:0f1e2d3c", "BODY-MARKER-91c2", "RESPONSE-MARKER-44d1", f.secret} {
		if strings.Contains(f.printed.String(), s) {
			f.t.Errorf("the output shows %q", s)
		}
	}
}

func (f *intentsFixture) record(id string) idempotency.Record {
	f.t.Helper()
	var r idempotency.Record
	if err := f.db.Gorm.Where("public_id = ?", id).Take(&r).Error; err != nil {
		f.t.Fatal(err)
	}
	return r
}

func TestIntentsListFilters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		for _, c := range []struct {
			args []string
			want []string
		}{
			{nil, []string{f.failed, f.pending, f.completed}},
			{[]string{"--status", "failed"}, []string{f.failed}},
			{[]string{"--status", "completed"}, []string{f.completed}},
			{[]string{"--consumer", "globex"}, []string{f.completed}},
			{[]string{"--consumer", "acme", "--status", "pending"}, []string{f.pending}},
			{[]string{"--consumer", "nobody"}, []string{}},
			{[]string{"--older-than", "1h"}, []string{f.failed, f.pending}},
			{[]string{"--older-than", "150m"}, []string{f.failed}},
			{[]string{"--per-page", "2", "--page", "2"}, []string{f.completed}},
		} {
			if got := f.rows(c.args...); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("list %q = %v, want %v", c.args, got, c.want)
			}
		}
		stdout, stderr, err := f.run("list", "--per-page", "2")
		if err != nil || !strings.Contains(stderr, "page 1 of 2 (3 in all)") {
			t.Errorf("list --per-page 2: %v, stderr %q, want page 1 of 2 (3 in all)", err, stderr)
		}
		if row := lineWith(stdout, f.failed); !strings.Contains(row, "(server)") || !strings.Contains(row, "acme") {
			t.Errorf("the failed intent's row %q lacks its consumer or the server-made key mark", row)
		}
		f.noSecrets()
	})
}

func TestIntentsListJSON(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		stdout, stderr, err := f.run("list", "--json")
		if err != nil {
			t.Fatalf("list --json: %v\n%s", err, stderr)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 3 {
			t.Fatalf("list --json = %v (%v), want an array of 3:\n%s", got, err, stdout)
		}
		failed, pending, completed := got[0], got[1], got[2]
		want := map[string]any{"id": f.pending, "consumer": "acme", "status": "pending", "attempts": 2.0,
			"key_digest": fixtureKeyDigest(t, seededKey), "key_source": "client", "external_ref": "acme.test",
			"request_id": "req-0001", "token_id": f.token, "resource_id": nil}
		for k, v := range want {
			if pending[k] != v {
				t.Errorf("pending[%s] = %v, want %v", k, pending[k], v)
			}
		}
		if result, ok := pending["result"]; ok {
			t.Errorf("pending has a result %v; the API's intent has none until it is completed", result)
		}
		if failed["key_source"] != "server" || failed["next_attempt_at"] == nil {
			t.Errorf("failed = %v, want key_source server and a next_attempt_at", failed)
		}
		result, _ := completed["result"].(map[string]any)
		if result["status"] != 201.0 || result["location"] != "/api/licenses/L1" || completed["consumer"] != "globex" {
			t.Errorf("completed = %v, want globex's with result 201 /api/licenses/L1", completed)
		}
		for _, at := range []any{pending["created_at"], pending["updated_at"], failed["next_attempt_at"]} {
			s, _ := at.(string)
			if parsed, err := time.Parse(events.TimeLayout, s); err != nil || events.Time(parsed) != s {
				t.Errorf("time %q is not the API's (UTC, microseconds: %s): %v", s, events.TimeLayout, err)
			}
		}
		if stdout, _, err := f.run("list", "--json", "--consumer", "nobody"); err != nil || strings.TrimSpace(stdout) != "[]" {
			t.Errorf("list --json of an unknown consumer = %q, %v; want []", stdout, err)
		}
		f.noSecrets()
	})
}

func TestIntentsShow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		stdout, _, err := f.run("show", f.completed)
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string]string{}
		for l := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
			k, v, _ := strings.Cut(l, " ")
			fields[k] = strings.TrimSpace(v)
		}
		want := map[string]string{"id": f.completed, "consumer": "globex", "status": "completed",
			"result": "201 /api/licenses/L1", "external_ref": "-", "resource_id": "L1", "key_source": "client"}
		for k, v := range want {
			if fields[k] != v {
				t.Errorf("show: %s = %q, want %q:\n%s", k, fields[k], v, stdout)
			}
		}
		for _, args := range [][]string{{"show", "--json", f.pending}, {"show", f.pending, "--json"}} {
			stdout, _, err := f.run(args...)
			var got map[string]any
			if err != nil || json.Unmarshal([]byte(stdout), &got) != nil || got["id"] != f.pending || got["token_id"] != f.token {
				t.Errorf("%q = %v, %s; want the pending intent as JSON", args, err, stdout)
			}
		}
		_, _, err = f.run("show", "01NOSUCHINTENT000000000000")
		if !errors.Is(err, idempotency.ErrIntentNotFound) || ExitCode(err) != 1 || !strings.Contains(err.Error(), "licensor intents list") {
			t.Errorf("show of an unknown id = %v, want not found (exit 1) naming `licensor intents list`", err)
		}
		f.noSecrets()
	})
}

func TestIntentsRetry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		stdout, stderr, err := f.run("retry", f.failed)
		if err != nil || !strings.Contains(stderr, "intent "+f.failed) || !strings.Contains(stderr, "pending again") {
			t.Fatalf("retry of a failed intent: %v, stderr %q", err, stderr)
		}
		if stdout != "" {
			t.Errorf("retry printed %q on stdout", stdout)
		}
		if r := f.record(f.failed); r.Status != idempotency.StatusPending || r.Attempts != 0 {
			t.Errorf("after retry: status %s, attempts %d; want pending, 0", r.Status, r.Attempts)
		}

		_, _, err = f.run("retry", f.pending)
		if !errors.Is(err, idempotency.ErrNotFailed) || ExitCode(err) != 1 || !strings.Contains(err.Error(), "pending") {
			t.Errorf("retry of a pending intent = %v, want ErrNotFailed (exit 1) naming its status", err)
		}
		if r := f.record(f.pending); r.Status != idempotency.StatusPending || r.Attempts != 2 {
			t.Errorf("a refused retry changed the intent: status %s, attempts %d", r.Status, r.Attempts)
		}
		_, _, err = f.run("retry", "01NOSUCHINTENT000000000000")
		if !errors.Is(err, idempotency.ErrIntentNotFound) || ExitCode(err) != 1 || !strings.Contains(err.Error(), "licensor intents list") {
			t.Errorf("retry of an unknown id = %v, want not found (exit 1) naming `licensor intents list`", err)
		}
		f.noSecrets()
	})
}

// The reconciler's "reconciled" line carries error= only when the attempt
// failed, not error=<nil> on a success.
func TestReconciledLogsErrorOnlyWhenThereIsOne(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		past := time.Now().Add(-time.Minute).UTC()
		if err := db.Gorm.Model(&idempotency.Record{}).Where("public_id = ?", f.pending).Update("locked_until", past).Error; err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), []string{"reconcile"}, f.env, &stdout, &stderr); err != nil {
			t.Fatalf("reconcile: %v\n%s", err, stderr.String())
		}
		line := lineWith(stderr.String(), `msg=reconciled`)
		if line == "" || !strings.Contains(line, "intent="+f.pending) || !strings.Contains(line, "result=") {
			t.Fatalf("no reconciled line for %s:\n%s", f.pending, stderr.String())
		}
		if strings.Contains(line, "error") {
			t.Errorf("a success logs an error attribute: %s", line)
		}

		// The failed intent, back to pending, has no request to resume.
		if _, _, err := f.run("retry", f.failed); err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Model(&idempotency.Record{}).Where("public_id = ?", f.failed).Update("locked_until", past).Error; err != nil {
			t.Fatal(err)
		}
		stderr.Reset()
		if err := Run(context.Background(), []string{"reconcile"}, f.env, &stdout, &stderr); err != nil {
			t.Fatalf("reconcile: %v\n%s", err, stderr.String())
		}
		if line := lineWith(stderr.String(), "msg=reconciled"); !strings.Contains(line, "intent="+f.failed) || !strings.Contains(line, `error="intent cannot be finished`) {
			t.Errorf("a failed attempt's reconciled line lacks its error:\n%s", stderr.String())
		}
	})
}

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// `licensor intents digest KEY` prints the key_digest that list and the API
// show for that key (keyed under APP_KEY), so an operator can find a
// consumer's request from the key they give.
func TestIntentsDigestFindsTheIntent(t *testing.T) {
	db := testdb.New(t, database.SQLite)
	f := newIntentsFixture(t, db)
	stdout, _, err := f.run("digest", seededKey)
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.TrimSpace(stdout)
	listed, _, err := f.run("list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if len(digest) != 12 || !strings.Contains(listed, `"key_digest": "`+digest+`"`) && !strings.Contains(listed, `"key_digest":"`+digest+`"`) {
		t.Errorf("digest %q is not the one list shows:\n%s", digest, listed)
	}
}

// An id that cannot exist (not a ULID: non-ASCII, too long, a control
// character) is not found, on every command that takes one, without a
// query: on MariaDB a comparison of such text with an ASCII column is an
// error ("Illegal mix of collations"), which must never reach an operator.
func TestCommandsRefuseIDsThatCannotExist(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		f := newIntentsFixture(t, db)
		for _, id := range []string{"é", strings.Repeat("A", 300), "01J\x7fQ"} {
			for _, args := range [][]string{
				{"intents", "show", id}, {"intents", "retry", id}, {"intents", "events", id},
				{"webhooks", "deliveries", id}, {"webhooks", "retry", id}, {"token", "revoke", id},
			} {
				stderr, err := f.runAny(args...)
				if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "not found") {
					t.Errorf("%q: %v (exit %d), want not found, exit 1\n%s", args, err, ExitCode(err), stderr)
				}
				if strings.Contains(stderr+fmt.Sprint(err), "collation") || strings.Contains(stderr+fmt.Sprint(err), "Error 1") {
					t.Errorf("%q: the database's words reached the operator: %v\n%s", args, err, stderr)
				}
			}
			if stderr, err := f.runAny("token", "events", "--token", id); err != nil {
				t.Errorf("token events --token %q: %v, want an empty trail\n%s", id, err, stderr)
			}
		}
	})
}
