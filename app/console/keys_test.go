package console

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/dbtime"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// fixtureKeyDigest is the key digest under the intents fixture's APP_KEY.
func fixtureKeyDigest(t *testing.T, key string) string {
	t.Helper()
	return mustCipher(t, []byte("0123456789abcdef0123456789abcdef")).Digest(key)
}

// keys' --help texts give what an operator needs at that step.
func TestKeysHelp(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"keys", "--help"}, []string{"rotate", "status"}},
		{[]string{"keys", "rotate", "--help"}, []string{"APP_PREVIOUS_KEYS=<the old APP_KEY>", "restart", "licensor keys rotate", "drop the old key", "-batch"}},
		{[]string{"keys", "status", "--help"}, []string{"usage: licensor keys status", "APP_PREVIOUS_KEYS", "fingerprint", "plaintext",
			"unreadable", "changes nothing", "-json", "-batch"}},
	} {
		var stdout bytes.Buffer
		if err := Run(context.Background(), tc.args, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%q lacks %q:\n%s", tc.args, want, stdout.String())
			}
		}
	}
}

// Rotation, batch by batch, over every kind of stored value: plaintext from
// before encryption at rest, envelopes under the previous key and under the
// current one, no body at all. A second run changes nothing; a value no key
// opens fails the run, naming its id and not its value.
func TestKeysRotate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Chdir(t.TempDir())
		keyA, keyB := bytes.Repeat([]byte{0xA}, 32), bytes.Repeat([]byte{0xB}, 32)
		underA, _ := crypt.New(keyA)
		underB, _ := crypt.New(keyB)
		seal := func(c *crypt.Cipher, s string) string { v, _ := c.Encrypt([]byte(s)); return v }

		now := dbtime.Now()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'c1', ?, ?)", now, now).Error)
		keys := map[string]string{ // id → plaintext
			"L1": "LK-plain-1", "L2": "LK-under-a-2", "L3": "LK-under-b-3", "L4": "LK-plain-4", "L5": "LK-under-a-5",
		}
		stored := map[string]string{
			"L1": "LK-plain-1", "L2": seal(underA, "LK-under-a-2"), "L3": seal(underB, "LK-under-b-3"),
			"L4": "LK-plain-4", "L5": seal(underA, "LK-under-a-5"),
		}
		for id, v := range stored {
			must(db.Gorm.Exec(`INSERT INTO licenses (id, consumer_id, name, domain, license_key, status, vendor_site_id, created_at, updated_at)
				VALUES (?, 'c1', ?, ?, ?, 'revoked', ?, ?, ?)`, id, id, strings.ToLower(id)+".test", v, "s-"+id, now, now).Error)
		}
		bodies := []any{[]byte(`{"data":{"license_key":"LK-plain-1"}}`), []byte(seal(underA, "body-a")), nil, []byte(seal(underB, "body-b"))}
		for i, body := range bodies {
			must(db.Gorm.Exec(`INSERT INTO idempotency_keys (consumer_id, operation, idempotency_key, request_hash, status, response_body, attempts, created_at, updated_at, expires_at)
				VALUES ('c1', 'op', ?, 'h', 'completed', ?, 1, ?, ?, ?)`, fmt.Sprintf("k%d", i), body, now, now, now.Add(time.Hour)).Error)
		}

		env := dbEnv(db, map[string]string{"APP_ENV": "testing", "APP_KEY": config.EncodeKey(keyB), "APP_PREVIOUS_KEYS": config.EncodeKey(keyA)})
		rotate := func() (string, error) {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), []string{"keys", "rotate", "--batch", "2"}, env, &out, &errOut)
			return out.String() + errOut.String(), err
		}
		out, err := rotate()
		if err != nil {
			t.Fatalf("keys rotate: %v\n%s", err, out)
		}
		for _, want := range []string{
			"licenses.license_key: 5 checked, 4 re-encrypted, 1 already under APP_KEY, 0 changed meanwhile, 0 unreadable",
			"idempotency_keys.response_body: 3 checked, 2 re-encrypted, 1 already under APP_KEY, 0 changed meanwhile, 0 unreadable",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("first run lacks %q:\n%s", want, out)
			}
		}
		snapshot := func() map[string]string {
			rows := map[string]string{}
			var lics []struct{ ID, LicenseKey string }
			must(db.Gorm.Raw("SELECT id, license_key FROM licenses").Scan(&lics).Error)
			for _, l := range lics {
				rows[l.ID] = l.LicenseKey
			}
			var recs []struct {
				IdempotencyKey string
				ResponseBody   []byte
			}
			must(db.Gorm.Raw("SELECT idempotency_key, response_body FROM idempotency_keys").Scan(&recs).Error)
			for _, r := range recs {
				rows[r.IdempotencyKey] = string(r.ResponseBody)
			}
			return rows
		}
		after := snapshot()
		for id, plain := range keys {
			if got, err := underB.Decrypt(after[id]); err != nil || string(got) != plain {
				t.Errorf("license %s under B alone = %q, %v; want %q", id, got, err, plain)
			}
		}
		for i, want := range []string{`{"data":{"license_key":"LK-plain-1"}}`, "body-a", "", "body-b"} {
			k := fmt.Sprintf("k%d", i)
			if want == "" {
				if after[k] != "" {
					t.Errorf("a NULL body became %q", after[k])
				}
				continue
			}
			if got, err := underB.Decrypt(after[k]); err != nil || string(got) != want {
				t.Errorf("body %s under B alone = %q, %v; want %q", k, got, err, want)
			}
		}
		if after["L3"] != stored["L3"] || after["k3"] != string(bodies[3].([]byte)) {
			t.Error("a value already under the current key was rewritten")
		}

		out, err = rotate()
		if err != nil {
			t.Fatalf("second keys rotate: %v\n%s", err, out)
		}
		if strings.Count(out, " 0 re-encrypted") != len(sealedColumns) {
			t.Errorf("the second run re-encrypted something:\n%s", out)
		}
		if again := snapshot(); fmt.Sprint(again) != fmt.Sprint(after) {
			t.Error("the second run changed stored values")
		}

		// A value no configured key opens: left alone, named by id, never shown.
		lost := seal(mustCipher(t, bytes.Repeat([]byte{0xC}, 32)), "LK-lost-key")
		must(db.Gorm.Exec("UPDATE licenses SET license_key = ? WHERE id = 'L4'", lost).Error)
		out, err = rotate()
		if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "L4") || !strings.Contains(out, "1 unreadable") {
			t.Fatalf("rotate with an unreadable value = %v\n%s", err, out)
		}
		if strings.Contains(err.Error()+out, lost) || strings.Contains(err.Error()+out, "LK-lost-key") {
			t.Errorf("the value reached the output: %v\n%s", err, out)
		}
		if snapshot()["L4"] != lost {
			t.Error("an unreadable value was rewritten")
		}
	})
}

func mustCipher(t *testing.T, key []byte) *crypt.Cipher {
	t.Helper()
	c, err := crypt.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
