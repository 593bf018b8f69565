package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// otherKey is a second APP_KEY, for rotation.
var otherKey = []byte("fedcba9876543210fedcba9876543210")

// withKeys builds the app under APP_KEY key and APP_PREVIOUS_KEYS previous.
func withKeys(key []byte, previous ...[]byte) option {
	return withConfig(func(c *config.Config) { c.Key, c.PreviousKeys = key, previous })
}

// License keys and stored responses never reach the disk in plaintext: not
// the SQLite file nor its write-ahead log, not a dump of the MySQL
// database. A replay is the first response, byte for byte, key included.
func TestSecretsEncryptedAtRest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		first := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "enc-key-1")...).wantStatus(http.StatusCreated)
		keyless := a.do(http.MethodPost, "/api/licenses", `{"name":"Globex","domain":"globex.test"}`, acme...).wantStatus(http.StatusCreated) // an auto: record
		licenseKey, _ := first.licenseData()["license_key"].(string)
		secondKey, _ := keyless.licenseData()["license_key"].(string)
		if licenseKey == "" || secondKey == "" {
			t.Fatalf("no license key in %s or %s", first.Body.String(), keyless.Body.String())
		}

		replay := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "enc-key-1")...).wantStatus(http.StatusCreated)
		if replay.Header().Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("replay = %q, want the first 201 byte for byte: %q", replay.Body.String(), first.Body.String())
		}
		if !strings.Contains(replay.Body.String(), licenseKey) {
			t.Errorf("the replay lacks the license key: %s", replay.Body.String())
		}
		id, _ := first.licenseData()["id"].(string)
		if got := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"]; got != licenseKey {
			t.Errorf("GET shows license_key %v, want %s", got, licenseKey)
		}
		if got := a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).Body.String(); !strings.Contains(got, licenseKey) {
			t.Errorf("the list lacks the license key: %s", got)
		}

		for name, raw := range rawDatabase(t, db) {
			if !bytes.Contains(raw, []byte("globex.test")) {
				t.Errorf("%s lacks the domain, so searching it proves nothing (%d bytes)", name, len(raw))
			}
			for _, key := range []string{licenseKey, secondKey} {
				if bytes.Contains(raw, []byte(key)) {
					t.Errorf("%s holds the license key %s in plaintext", name, key)
				}
			}
		}
	})
}

// rawDatabase is every byte the database keeps on disk, by source: the
// SQLite file and its -wal file, or a mysqldump of the MySQL database.
func rawDatabase(t *testing.T, db *testdb.DB) map[string][]byte {
	t.Helper()
	if db.Dialect == database.SQLite {
		// The file and its log together: they hold everything, each alone
		// may not (a checkpoint moves pages from the log to the file).
		var both []byte
		for _, path := range []string{db.Config.Database, db.Config.Database + "-wal"} {
			b, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			both = append(both, b...)
		}
		return map[string][]byte{"file and log": both}
	}
	dump, err := exec.LookPath("mysqldump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("mysqldump is missing, and CI=true: the MySQL half must run")
		}
		t.Skip("mysqldump is missing: the MySQL half is skipped")
	}
	cfg, err := mysqldriver.ParseDSN(db.Config.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port := cfg.Addr, "3306"
	if h, p, ok := strings.Cut(cfg.Addr, ":"); ok {
		host, port = h, p
	}
	// No --hex-blob: BLOBs are dumped as the bytes they hold.
	cmd := exec.Command(dump, "--protocol=TCP", "-h", host, "-P", port, "-u", cfg.User, "--skip-extended-insert", cfg.DBName)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+cfg.Passwd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mysqldump: %v\n%s", err, stderr.String())
	}
	return map[string][]byte{"mysqldump": out}
}

// Rotation: written under key A; read under B with A previous; `licensor
// keys rotate`; read under B alone. Under A alone the reads fail, and the
// answers show neither the key nor why.
func TestKeyRotation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Chdir(t.TempDir()) // no .env reaches the command
		a := newApp(t, db)   // testKey
		acme := a.consumer("acme")
		first := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "rotate-key-1")...).wantStatus(http.StatusCreated)
		id, _ := first.licenseData()["id"].(string)
		licenseKey, _ := first.licenseData()["license_key"].(string)

		reads := func(name string, opts ...option) {
			t.Helper()
			b := newApp(t, db, opts...)
			acme := b.consumer("acme") // tokens are signed with APP_KEY alone: a new key, a new token
			got := b.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"]
			if got != licenseKey {
				t.Errorf("%s: license_key %v, want %s", name, got, licenseKey)
			}
			replay := b.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "rotate-key-1")...).wantStatus(http.StatusCreated)
			if !bytes.Equal(replay.Body.Bytes(), first.Body.Bytes()) {
				t.Errorf("%s: replay %q, want %q", name, replay.Body.String(), first.Body.String())
			}
		}
		reads("B, A previous", withKeys(otherKey, testKey))
		// A token signed with A still works while A is a previous key, so a
		// rotation logs nobody out; once A is dropped it does not.
		newApp(t, db, withKeys(otherKey, testKey)).do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK)
		newApp(t, db, withKeys(otherKey)).do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusUnauthorized)

		vars := map[string]string{"APP_ENV": "testing", "APP_KEY": config.EncodeKey(otherKey), "APP_PREVIOUS_KEYS": config.EncodeKey(testKey)}
		if db.Dialect == database.MySQL {
			vars["DB_CONNECTION"], vars["DB_URL"] = "mysql", db.Config.URL
		} else {
			vars["DB_DATABASE"] = db.Config.Database
		}
		rotate := func() string {
			t.Helper()
			var out, errOut bytes.Buffer
			if err := console.Run(context.Background(), []string{"keys", "rotate"}, func(k string) string { return vars[k] }, &out, &errOut); err != nil {
				t.Fatalf("keys rotate: %v\n%s%s", err, out.String(), errOut.String())
			}
			return out.String()
		}
		out := rotate()
		for _, want := range []string{"licenses.license_key: 1 checked, 1 re-encrypted", "idempotency_keys.response_body: 1 checked, 1 re-encrypted",
			"idempotency_keys.request_body: 1 checked, 1 re-encrypted"} {
			if !strings.Contains(out, want) {
				t.Errorf("keys rotate printed no %q:\n%s", want, out)
			}
		}
		if again := rotate(); strings.Count(again, " 0 re-encrypted") != strings.Count(again, " re-encrypted") {
			t.Errorf("a second keys rotate changed something:\n%s", again)
		}

		reads("B alone", withKeys(otherKey))

		old := newApp(t, db, withKeys(testKey))
		acme = old.consumer("acme")
		for _, r := range []*response{
			old.do(http.MethodGet, "/api/licenses/"+id, "", acme...),
			old.do(http.MethodGet, "/api/licenses", "", acme...),
			old.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "rotate-key-1")...),
		} {
			if r.Code != http.StatusServiceUnavailable || !strings.Contains(r.Body.String(), `"code":"key_unavailable"`) {
				t.Errorf("under the old key alone: %d %s, want 503 key_unavailable", r.Code, r.Body.String())
			}
			for _, leak := range []string{licenseKey, "crypt", "decrypt", "eyJpdiI6"} {
				if strings.Contains(r.Body.String(), leak) {
					t.Errorf("the answer shows %q: %s", leak, r.Body.String())
				}
			}
		}
		if strings.Contains(old.logs.String(), licenseKey) {
			t.Error("the license key reached the log")
		}
	})
}

// The key digest of logs and intents is keyed by APP_KEY: not the plain
// SHA-256 prefix, stable for one APP_KEY, different under another, and the
// same in the intents API as in the log.
func TestKeyDigestIsKeyedByAppKey(t *testing.T) {
	db := testdb.New(t, database.SQLite)
	a := newApp(t, db)
	key := "digest-key-5005"
	a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(a.consumer("acme"), key)...).wantStatus(http.StatusCreated)
	digest := a.store.KeyDigest(key)
	sum := sha256.Sum256([]byte(key))
	if len(digest) != 12 || digest == hex.EncodeToString(sum[:6]) {
		t.Errorf("digest %q: want 12 hex characters, not the plain SHA-256 prefix", digest)
	}
	if !strings.Contains(a.logs.String(), `"key_digest":"`+digest+`"`) {
		t.Errorf("the log shows another digest:\n%s", a.logs.String())
	}
	intents := a.do(http.MethodGet, "/api/intents", "", bearer(a.token("ops", auth.IntentsManage))...).wantStatus(http.StatusOK).Body.String()
	if !strings.Contains(intents, `"key_digest":"`+digest+`"`) {
		t.Errorf("GET /api/intents shows another digest: %s", intents)
	}
	if same := newApp(t, db).store.KeyDigest(key); same != digest {
		t.Errorf("another app under the same APP_KEY: digest %s, want %s", same, digest)
	}
	if other := newApp(t, db, withKeys(otherKey, testKey)).store.KeyDigest(key); other == digest {
		t.Error("the digest is the same under another APP_KEY")
	}
}

// A vendor event carries the site's license key, and its intent keeps the
// event as its stored request: that is sealed too. After a key_rotated
// webhook the new key is in no byte of the SQLite file, its write-ahead
// log, an online backup of it, or a dump of the MySQL database; the
// license shows it, opened.
func TestVendorEventKeysSealedAtRest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		const rotated = "LK-ROTATED-5d3a9f0c2b7e4f18"
		body := vendorEventBody("evt_rotate_1", "site.key_rotated", time.Now().Add(-time.Minute), lic["vendor_site_id"].(string), rotated)
		a.webhook(body, signature(time.Now(), body, webhookSecret)).wantStatus(http.StatusOK)
		if got := a.do(http.MethodGet, "/api/licenses/"+lic["id"].(string), "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"]; got != rotated {
			t.Fatalf("license_key = %v, want the rotated key", got)
		}
		raw := rawDatabase(t, db)
		if db.Dialect == database.SQLite {
			copyPath := filepath.Join(t.TempDir(), "backup.sqlite")
			if err := database.BackupSQLite(context.Background(), db.Gorm, copyPath); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(copyPath)
			if err != nil {
				t.Fatal(err)
			}
			raw["backup"] = b
		}
		for name, bytesOf := range raw {
			if !bytes.Contains(bytesOf, []byte("evt_rotate_1")) {
				t.Errorf("%s lacks the event's key (its id), so searching it proves nothing (%d bytes)", name, len(bytesOf))
			}
			if bytes.Contains(bytesOf, []byte(rotated)) {
				t.Errorf("%s holds the rotated license key in plaintext", name)
			}
		}
	})
}
