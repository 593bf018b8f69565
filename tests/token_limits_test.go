package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// expires_in above TOKEN_MAX_TTL is refused with a 422, not shortened.
func TestExpiresInAboveMaxTTLIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withConfig(func(c *config.Config) { c.TokenMaxTTL = 720 * time.Hour }))
		root := bearer(a.token("root", auth.All))
		before := a.tableRows("personal_access_tokens")
		for _, d := range []string{"721h", "720h0m1s", "8760h"} {
			wantFieldError(a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"],"expires_in":"`+d+`"}`, root...),
				"expires_in", "must not be greater than 720h")
		}
		if after := a.tableRows("personal_access_tokens"); after != before {
			t.Errorf("refused requests stored %d tokens", after-before)
		}
		data := issuedData(a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"],"expires_in":"720h"}`, root...))
		expires, err := time.Parse(laravelTime, data["expires_at"].(string))
		if err != nil || time.Until(expires) < 719*time.Hour || time.Until(expires) > 720*time.Hour+time.Minute {
			t.Errorf("expires_at = %v, want 720h ahead", data["expires_at"])
		}
		// Without expires_in, TOKEN_TTL (24h here) applies.
		data = issuedData(a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"]}`, root...))
		if expires, _ := time.Parse(laravelTime, data["expires_at"].(string)); time.Until(expires) > testTTL+time.Minute {
			t.Errorf("expires_at = %v, want TOKEN_TTL ahead", data["expires_at"])
		}
	})
}

// With TOKEN_MAX_TTL unset (zero in a hand-made Config) the cap is a year.
func TestMaxTTLDefaultsToAYear(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		issuedData(a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"],"expires_in":"8760h"}`, root...))
		wantFieldError(a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"],"expires_in":"8761h"}`, root...),
			"expires_in", "must not be greater than 8760h")
	})
}

func TestTokenMaxTTLConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	load := func(vars map[string]string) (config.Config, error) {
		return config.Load(func(k string) string { return vars[k] })
	}
	c, err := load(nil)
	if err != nil || c.TokenMaxTTL != 8760*time.Hour || c.TokenTTL != 2160*time.Hour {
		t.Fatalf("defaults: TokenMaxTTL = %v, TokenTTL = %v, err %v; want 8760h, 2160h", c.TokenMaxTTL, c.TokenTTL, err)
	}
	for _, bad := range []string{"forever", "-1h", "0"} {
		if _, err := load(map[string]string{"TOKEN_MAX_TTL": bad}); err == nil || !strings.Contains(err.Error(), "TOKEN_MAX_TTL") {
			t.Errorf("TOKEN_MAX_TTL=%s: err = %v, want one naming TOKEN_MAX_TTL", bad, err)
		}
	}
	if _, err := load(map[string]string{"TOKEN_MAX_TTL": "720h"}); err == nil || !strings.Contains(err.Error(), "TOKEN_TTL") || !strings.Contains(err.Error(), "TOKEN_MAX_TTL") {
		t.Errorf("default TOKEN_TTL (2160h) above TOKEN_MAX_TTL=720h: err = %v, want one naming both", err)
	}
	if _, err := load(map[string]string{"TOKEN_TTL": "9000h"}); err == nil || !strings.Contains(err.Error(), "TOKEN_TTL") {
		t.Errorf("TOKEN_TTL=9000h above the default TOKEN_MAX_TTL: err = %v, want one naming TOKEN_TTL", err)
	}
	if c, err := load(map[string]string{"TOKEN_TTL": "720h", "TOKEN_MAX_TTL": "720h"}); err != nil || c.TokenMaxTTL != 720*time.Hour {
		t.Errorf("TOKEN_TTL = TOKEN_MAX_TTL = 720h: %v, %v", c.TokenMaxTTL, err)
	}
	// .env.example documents it.
	if !strings.Contains(readRepoFile(t, ".env.example"), "\nTOKEN_MAX_TTL=8760h\n") {
		t.Errorf(".env.example lacks TOKEN_MAX_TTL=8760h")
	}
}

// Two Authorization headers are refused, even when both hold the same good
// token: which one counts is never guessed.
func TestTwoAuthorizationHeadersAre401(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		good := a.token("root", auth.All)
		other := a.token("acme", auth.LicensesRead)
		for name, headers := range map[string][]string{
			"same token twice":  append(bearer(good), bearer(good)...),
			"good then garbage": append(bearer(good), "Authorization", "Bearer not.a.jwt"),
			"garbage then good": append([]string{"Authorization", "Bearer not.a.jwt"}, bearer(good)...),
			"two consumers":     append(bearer(other), bearer(good)...),
			"empty then good":   append([]string{"Authorization", ""}, bearer(good)...),
		} {
			t.Run(name, func(t *testing.T) {
				r := a.in(t).do(http.MethodGet, "/api/tokens", "", headers...).wantStatus(http.StatusUnauthorized)
				if got := strings.TrimSpace(r.Body.String()); got != `{"message":"Unauthenticated."}` {
					t.Errorf("body = %s", got)
				}
			})
		}
		a.do(http.MethodGet, "/api/tokens", "", bearer(good)...).wantStatus(http.StatusOK)
	})
}

// A token whose consumer row is gone (foreign keys off) is refused: the
// token's row is read with an inner join on its consumer.
func TestTokenOfDeletedConsumerIs401(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		issued := a.issued("acme", auth.All)
		a.do(http.MethodGet, "/api/tokens", "", bearer(issued.Secret)...).wantStatus(http.StatusOK)
		deleteWithoutForeignKeys(t, db, "DELETE FROM consumers WHERE id = ?", issued.ConsumerID)
		var left int64
		if err := db.Gorm.Model(&auth.Token{}).Where("id = ?", issued.ID).Count(&left).Error; err != nil || left != 1 {
			t.Fatalf("the token row is gone too (%d rows, %v): the test needs it kept", left, err)
		}
		r := a.do(http.MethodGet, "/api/tokens", "", bearer(issued.Secret)...).wantStatus(http.StatusUnauthorized)
		if got := strings.TrimSpace(r.Body.String()); got != `{"message":"Unauthenticated."}` {
			t.Errorf("body = %s", got)
		}
		if _, err := a.auth.Verify(context.Background(), issued.Secret); err != auth.ErrUnauthenticated {
			t.Errorf("Verify = %v, want ErrUnauthenticated", err)
		}
	})
}

// deleteWithoutForeignKeys runs the statement on one connection with the
// foreign keys off (SQLite's pool has that one connection; on MySQL the
// setting is the session's), and turns them on again.
func deleteWithoutForeignKeys(t *testing.T, db *testdb.DB, sql string, args ...any) {
	t.Helper()
	off, on := "PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys = ON"
	if db.Dialect == database.MySQL {
		off, on = "SET FOREIGN_KEY_CHECKS = 0", "SET FOREIGN_KEY_CHECKS = 1"
	}
	ctx := context.Background()
	err := db.Gorm.Connection(func(conn *gorm.DB) error {
		// A fresh session per statement, each on the one connection.
		if err := conn.WithContext(ctx).Exec(off).Error; err != nil {
			return err
		}
		defer conn.WithContext(ctx).Exec(on)
		return conn.WithContext(ctx).Exec(sql, args...).Error
	})
	if err != nil {
		t.Fatal(err)
	}
}
