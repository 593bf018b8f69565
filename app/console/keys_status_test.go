package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/dbtime"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The rotation procedure keys rotate --help gives is the one that is safe
// for a rolling restart: the new key is first added as a previous key
// everywhere, then made the current one, then the values re-sealed and
// counted, then the old key dropped; each step a rolling restart. It says
// what happens to tokens signed with the old key.
func TestKeysRotateUsageGivesTheRollingProcedure(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout bytes.Buffer
	if err := Run(context.Background(), []string{"keys", "rotate", "--help"}, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(stdout.String()), " ")
	steps := []string{
		"1. make a key", "add it to APP_PREVIOUS_KEYS on every replica, APP_KEY unchanged; rolling restart",
		"2. switch: on every replica APP_KEY=<the new key> and APP_PREVIOUS_KEYS=<the old APP_KEY>; rolling restart",
		"3. run licensor keys rotate",
		"4. run licensor keys status until it reports no value under a previous key",
		"5. drop the old key from APP_PREVIOUS_KEYS on every replica; rolling restart",
	}
	at := 0
	for _, step := range steps {
		i := strings.Index(help[at:], step)
		if i < 0 {
			t.Fatalf("keys rotate --help lacks %q after what came before it:\n%s", step, stdout.String())
		}
		at += i + len(step)
	}
	for _, want := range []string{"503 key_unavailable", "refused (401) from step 5", "Issue new tokens after step 2"} {
		if !strings.Contains(help, want) {
			t.Errorf("keys rotate --help lacks %q:\n%s", want, stdout.String())
		}
	}
}

// keys status counts each sealed column's values by what opens them: the
// current key, each previous key in APP_PREVIOUS_KEYS' order, plaintext, and
// no configured key; it changes nothing, shows no key, exits 0 even with
// unreadable values, and its last line says whether a previous key still
// seals values. After keys rotate no value is left under a previous key.
func TestKeysStatus(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Chdir(t.TempDir())
		keyA, keyB := bytes.Repeat([]byte{0xA}, 32), bytes.Repeat([]byte{0xB}, 32)
		keyC, keyD := bytes.Repeat([]byte{0xC}, 32), bytes.Repeat([]byte{0xD}, 32)
		seal := func(key []byte, s string) string { v, _ := mustCipher(t, key).Encrypt([]byte(s)); return v }
		now := dbtime.Now()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'c1', ?, ?)", now, now).Error)
		// B is APP_KEY; A then D are APP_PREVIOUS_KEYS; C is configured nowhere.
		licenses := []string{"LK-plain-1", seal(keyA, "LK-a-2"), seal(keyB, "LK-b-3"), seal(keyC, "LK-c-4"), seal(keyA, "LK-a-5"), seal(keyD, "LK-d-6"), seal(keyB, "LK-b-7")}
		for i, v := range licenses {
			id := fmt.Sprintf("L%d", i+1)
			must(db.Gorm.Exec(`INSERT INTO licenses (id, consumer_id, name, domain, license_key, status, vendor_site_id, created_at, updated_at)
				VALUES (?, 'c1', ?, ?, ?, 'revoked', ?, ?, ?)`, id, id, strings.ToLower(id)+".test", v, "s-"+id, now, now).Error)
		}
		bodies := []struct{ response, request any }{
			{[]byte(`{"data":{"license_key":"LK-plain-1"}}`), []byte(seal(keyA, `{"event":"a"}`))},
			{[]byte(seal(keyA, "body-a")), nil},
			{nil, []byte(seal(keyB, `{"event":"b"}`))},
			{[]byte(seal(keyB, "body-b")), []byte(`{"name":"plain"}`)},
			{[]byte(seal(keyC, "body-c")), []byte(seal(keyD, `{"event":"d"}`))},
		}
		for i, b := range bodies {
			must(db.Gorm.Exec(`INSERT INTO idempotency_keys (consumer_id, operation, idempotency_key, request_hash, status, response_body, request_body, attempts, created_at, updated_at, expires_at)
				VALUES ('c1', 'op', ?, 'h', 'completed', ?, ?, 1, ?, ?, ?)`, fmt.Sprintf("k%d", i), b.response, b.request, now, now, now.Add(time.Hour)).Error)
		}

		vars := map[string]string{"APP_ENV": "testing", "APP_KEY": config.EncodeKey(keyB), "APP_PREVIOUS_KEYS": config.EncodeKey(keyA) + "," + config.EncodeKey(keyD)}
		env := dbEnv(db, vars)
		run := func(args ...string) string {
			t.Helper()
			var out, errOut bytes.Buffer
			if err := Run(context.Background(), append([]string{"keys"}, args...), env, &out, &errOut); err != nil {
				t.Fatalf("keys %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
			}
			for _, key := range [][]byte{keyA, keyB, keyC, keyD} {
				for _, shown := range []string{base64.StdEncoding.EncodeToString(key), hex.EncodeToString(key)} {
					if strings.Contains(out.String()+errOut.String(), shown) {
						t.Fatalf("keys %s shows a key:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
					}
				}
			}
			return out.String()
		}
		status := func() keyStatus {
			t.Helper()
			var st keyStatus
			if out := run("status", "--json", "--batch", "2"); json.Unmarshal([]byte(out), &st) != nil {
				t.Fatalf("keys status --json printed no status object:\n%s", out)
			}
			return st
		}
		counts := func(st keyStatus) string {
			var parts []string
			for _, c := range st.Columns {
				parts = append(parts, fmt.Sprintf("%s current=%d previous=%v plaintext=%d unreadable=%d", c.Column, c.Current, c.Previous, c.Plaintext, c.Unreadable))
			}
			return strings.Join(parts, "; ")
		}
		snapshot := func() string {
			var rows []map[string]any
			must(db.Gorm.Raw("SELECT id, license_key FROM licenses ORDER BY id").Scan(&rows).Error)
			var recs []map[string]any
			must(db.Gorm.Raw("SELECT id, response_body, request_body FROM idempotency_keys ORDER BY id").Scan(&recs).Error)
			return fmt.Sprint(rows, recs)
		}

		before := snapshot()
		fp, err := crypt.New(keyB, keyA, keyD)
		must(err)
		st := status()
		if st.Keys.Current != fp.Fingerprint(0) || fmt.Sprint(st.Keys.Previous) != fmt.Sprint([]string{fp.Fingerprint(1), fp.Fingerprint(2)}) {
			t.Errorf("keys = %+v, want the fingerprints %s, [%s %s]", st.Keys, fp.Fingerprint(0), fp.Fingerprint(1), fp.Fingerprint(2))
		}
		want := "licenses.license_key current=2 previous=[2 1] plaintext=1 unreadable=1; " +
			"idempotency_keys.response_body current=1 previous=[1 0] plaintext=1 unreadable=1; " +
			"idempotency_keys.request_body current=1 previous=[1 1] plaintext=1 unreadable=0; " +
			"consumer_events.data current=0 previous=[0 0] plaintext=0 unreadable=0; " +
			"webhook_endpoints.secret current=0 previous=[0 0] plaintext=0 unreadable=0"
		if got := counts(st); got != want || !st.PreviousInUse {
			t.Errorf("status = %s (previous in use %v),\nwant     %s (previous in use true)", got, st.PreviousInUse, want)
		}
		table := run("status")
		lines := strings.Split(strings.TrimSpace(table), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "previous keys in use: previous key 1 ("+fp.Fingerprint(1)+") seals 4 value(s), previous key 2 ("+fp.Fingerprint(2)+") seals 2 value(s)") {
			t.Errorf("the last line = %q, want it to name both previous keys and their counts:\n%s", last, table)
		}
		for _, want := range []string{"COLUMN", "APP_KEY", "PREVIOUS 1", "PREVIOUS 2", "PLAINTEXT", "UNREADABLE", "2 value(s) open under no configured key", "3 value(s) in plaintext"} {
			if !strings.Contains(table, want) {
				t.Errorf("the table lacks %q:\n%s", want, table)
			}
		}
		if snapshot() != before {
			t.Error("keys status changed stored values")
		}

		// keys rotate re-seals all it can (C's values stay: it exits 1).
		var out bytes.Buffer
		if err := Run(context.Background(), []string{"keys", "rotate"}, env, &out, &out); ExitCode(err) != 1 {
			t.Fatalf("keys rotate with values under an unknown key = %v, want exit 1\n%s", err, out.String())
		}
		st = status()
		want = "licenses.license_key current=6 previous=[0 0] plaintext=0 unreadable=1; " +
			"idempotency_keys.response_body current=3 previous=[0 0] plaintext=0 unreadable=1; " +
			"idempotency_keys.request_body current=4 previous=[0 0] plaintext=0 unreadable=0; " +
			"consumer_events.data current=0 previous=[0 0] plaintext=0 unreadable=0; " +
			"webhook_endpoints.secret current=0 previous=[0 0] plaintext=0 unreadable=0"
		if got := counts(st); got != want || st.PreviousInUse {
			t.Errorf("after keys rotate: status = %s (previous in use %v),\nwant     %s (previous in use false)", got, st.PreviousInUse, want)
		}
		table = run("status")
		if lines := strings.Split(strings.TrimSpace(table), "\n"); !strings.HasPrefix(lines[len(lines)-1], "previous keys in use: none;") {
			t.Errorf("after keys rotate the last line = %q, want none in use:\n%s", lines[len(lines)-1], table)
		}

		// With no previous key configured, what A sealed would be unreadable.
		vars["APP_PREVIOUS_KEYS"] = ""
		table = run("status")
		if lines := strings.Split(strings.TrimSpace(table), "\n"); lines[len(lines)-1] != "previous keys in use: none configured (APP_PREVIOUS_KEYS is empty)" ||
			strings.Contains(table, "PREVIOUS 1") {
			t.Errorf("without previous keys:\n%s", table)
		}
	})
}
