package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

// forge signs arbitrary claims with an arbitrary method and key.
func forge(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("forge: %v", err)
	}
	return s
}

// validClaims are the claims of a real token row, for tampering with.
func validClaims(t *testing.T, a *app, consumer string, abilities ...string) (jwt.MapClaims, string) {
	t.Helper()
	issued := a.issued(consumer, abilities...)
	return jwt.MapClaims{
		"iss": testIssuer, "sub": issued.ConsumerID, "jti": issued.ID, "abilities": abilities,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}, issued.ID
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for key, val := range c {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestEveryBadTokenIsUnauthenticated(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		claims, _ := validClaims(t, a, "acme", auth.All)
		revokedClaims, revokedID := validClaims(t, a, "acme", auth.All)
		if err := a.auth.Revoke(context.Background(), audit.Console(), revokedID); err != nil {
			t.Fatal(err)
		}
		deletedClaims, deletedID := validClaims(t, a, "acme", auth.All)
		if err := db.Gorm.Exec("DELETE FROM personal_access_tokens WHERE id = ?", deletedID).Error; err != nil {
			t.Fatal(err)
		}
		other, _ := validClaims(t, a, "globex", auth.All)
		otherKey := []byte("another-key-another-key-another-")
		none := forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims)

		cases := map[string][]string{
			"no header":       nil,
			"empty bearer":    {"Authorization", "Bearer "},
			"basic scheme":    {"Authorization", "Basic YWNtZTpzZWNyZXQ="},
			"garbage":         bearer("not.a.jwt"),
			"another key":     bearer(forge(t, jwt.SigningMethodHS256, otherKey, claims)),
			"alg none":        bearer(none),
			"HS512":           bearer(forge(t, jwt.SigningMethodHS512, testKey, claims)),
			"expired":         bearer(forge(t, jwt.SigningMethodHS256, testKey, with(claims, "exp", time.Now().Add(-time.Minute).Unix()))),
			"no exp":          bearer(forge(t, jwt.SigningMethodHS256, testKey, with(claims, "exp", nil))),
			"wrong issuer":    bearer(forge(t, jwt.SigningMethodHS256, testKey, with(claims, "iss", "https://evil.test"))),
			"revoked":         bearer(forge(t, jwt.SigningMethodHS256, testKey, revokedClaims)),
			"deleted row":     bearer(forge(t, jwt.SigningMethodHS256, testKey, deletedClaims)),
			"someone's jti":   bearer(forge(t, jwt.SigningMethodHS256, testKey, with(claims, "jti", other["jti"]))),
			"unknown jti":     bearer(forge(t, jwt.SigningMethodHS256, testKey, with(claims, "jti", "01JUNKJUNKJUNKJUNKJUNKJUNK"))),
			"tampered claims": bearer(tamper(forge(t, jwt.SigningMethodHS256, testKey, claims))),
		}
		for name, headers := range cases {
			t.Run(name, func(t *testing.T) {
				r := a.do(http.MethodGet, "/api/tokens", "", headers...)
				r.wantStatus(http.StatusUnauthorized)
				if got := strings.TrimSpace(r.Body.String()); got != `{"message":"Unauthenticated."}` {
					t.Errorf("body = %s, want exactly the Unauthenticated message", got)
				}
			})
		}
		// The untampered forged token is valid: the cases above fail for their reason alone.
		a.do(http.MethodGet, "/api/tokens", "", bearer(forge(t, jwt.SigningMethodHS256, testKey, claims))...).wantStatus(http.StatusOK)
	})
}

// tamper swaps the payload of a signed token for one granting more, keeping
// the signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	parts[1] = strings.TrimRight(jwtSegment(`{"sub":"x","jti":"y","abilities":["*"],"exp":9999999999,"iss":"`+testIssuer+`"}`), "=")
	return strings.Join(parts, ".")
}

func jwtSegment(s string) string {
	return strings.NewReplacer("+", "-", "/", "_").Replace(base64Std(s))
}

func TestAbilities(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		reader := a.token("acme", auth.LicensesRead, auth.LicensesWrite)
		r := a.do(http.MethodGet, "/api/tokens", "", bearer(reader)...)
		r.wantError(http.StatusForbidden, "missing_ability")
		if got := r.json()["message"]; got != "Invalid ability provided." {
			t.Errorf("message = %v", got)
		}
		a.do(http.MethodGet, "/api/tokens", "", bearer(a.token("root", auth.All))...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/tokens", "", bearer(a.token("admin", auth.TokensManage))...).wantStatus(http.StatusOK)
	})
}

func TestAdminTokenRoundTrip(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		admin := bearer(a.token("ops", auth.All))

		r := a.do(http.MethodPost, "/api/tokens", `{"consumer":"acme","abilities":["tokens:manage"],"name":"ci","expires_in":"720h"}`, admin...)
		r.wantStatus(http.StatusCreated)
		data := r.json()["data"].(map[string]any)
		secret, _ := data["token"].(string)
		id, _ := data["id"].(string)
		if secret == "" || id == "" || data["consumer"] != "acme" || data["name"] != "ci" {
			t.Fatalf("issued = %v", data)
		}
		expires, err := time.Parse(laravelTime, data["expires_at"].(string))
		if err != nil || time.Until(expires) < 719*time.Hour || time.Until(expires) > 721*time.Hour {
			t.Errorf("expires_at = %v (%v), want about 720h ahead", data["expires_at"], err)
		}
		var stored int64
		db.Gorm.Raw("SELECT COUNT(*) FROM personal_access_tokens WHERE abilities LIKE ? OR name LIKE ?", "%"+secret+"%", "%"+secret+"%").Scan(&stored)
		if stored != 0 {
			t.Error("the token string is stored in the database")
		}

		newToken := bearer(secret)
		list := a.do(http.MethodGet, "/api/tokens?consumer=acme", "", newToken...).wantStatus(http.StatusOK)
		if strings.Contains(list.Body.String(), secret) || strings.Contains(list.Body.String(), `"token"`) {
			t.Errorf("list shows a secret: %s", list.Body.String())
		}
		if n := len(list.json()["data"].([]any)); n != 1 {
			t.Errorf("acme has %d tokens, want 1", n)
		}
		if n := len(a.do(http.MethodGet, "/api/tokens", "", admin...).json()["data"].([]any)); n != 2 {
			t.Errorf("all consumers: %d tokens, want 2", n)
		}

		a.do(http.MethodDelete, "/api/tokens/"+id, "", admin...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/tokens", "", newToken...).wantStatus(http.StatusUnauthorized) // the very next request
		a.do(http.MethodDelete, "/api/tokens/"+id, "", admin...).wantStatus(http.StatusNoContent)
		a.do(http.MethodDelete, "/api/tokens/01NOSUCHTOKEN0000000000000", "", admin...).wantError(http.StatusNotFound, "")
	})
}

func TestIssueTokenValidation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		admin := bearer(a.token("ops", auth.TokensManage))
		cases := []struct {
			name, body, field string
		}{
			{"unknown ability", `{"consumer":"acme","abilities":["licenses:delete"]}`, "abilities.0"}, // Laravel keys an array item's error by its index
			{"no abilities", `{"consumer":"acme","abilities":[]}`, "abilities"},
			{"no consumer", `{"abilities":["licenses:read"]}`, "consumer"},
			{"bad expiry", `{"consumer":"acme","abilities":["licenses:read"],"expires_in":"soon"}`, "expires_in"},
			{"wrong type", `{"consumer":"acme","abilities":"licenses:read"}`, "abilities"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				m := a.do(http.MethodPost, "/api/tokens", tc.body, admin...).wantError(http.StatusUnprocessableEntity, "")
				if errs, _ := m["errors"].(map[string]any); errs[tc.field] == nil {
					t.Errorf("errors = %v, want %s", m["errors"], tc.field)
				}
			})
		}
		a.do(http.MethodPost, "/api/tokens", `{"consumer":`, admin...).wantError(http.StatusBadRequest, "malformed_json")
	})
}
