package tests

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

// sessionCookie is the console session cookie cc's browser holds.
func (cc *consoleClient) sessionCookie() *http.Cookie {
	cc.t.Helper()
	u, _ := url.Parse(cc.srv.URL + "/console")
	for _, ck := range cc.http.Jar.Cookies(u) {
		if ck.Name == "licensor_console" {
			return &http.Cookie{Name: ck.Name, Value: ck.Value, Path: "/console"}
		}
	}
	cc.t.Fatal("no session cookie")
	return nil
}

// copyOn is another browser, on the server srv, holding a copy of cc's
// session cookie.
func (cc *consoleClient) copyOn(srv *consoleClient) *consoleClient {
	cc.t.Helper()
	copied := newConsoleClientOn(cc.t, srv.srv)
	u, _ := url.Parse(srv.srv.URL + "/console")
	copied.http.Jar.SetCookies(u, []*http.Cookie{cc.sessionCookie()})
	return copied
}

// Signing out ends the session on the server: a copy of its cookie, on this
// replica or another one on the same database, answers the sign-in page
// after, as an expired session does.
func TestConsoleSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, b := newApp(t, db), newApp(t, db) // two replicas of one database
		cc, onB := newConsoleClient(t, a), newConsoleClient(t, b)
		cc.signIn(a.token("ops", auth.All))
		copyA, copyB := cc.copyOn(cc), cc.copyOn(onB)
		copyA.get("/console").wantStatus(t, http.StatusOK)
		copyB.get("/console").wantStatus(t, http.StatusOK)

		cc.get("/console")
		if p := cc.post("/console/logout", nil); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/login" {
			t.Fatalf("sign out: %d %q", p.Status, p.Header.Get("Location"))
		}
		cc.get("/console").wantSignIn(t)
		copyA.get("/console").wantSignIn(t)
		copyB.get("/console").wantSignIn(t)
		copyB.get("/console/tokens").wantSignIn(t)
	})
}

// Revoking the token a session was opened with ends the session, on every
// replica: each console request reads the token's row.
func TestConsoleRevokedTokenEndsItsSessionOnEveryReplica(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, b := newApp(t, db), newApp(t, db)
		cc, tok := consoleAs(t, a, "ops", auth.IntentsManage)
		copyB := cc.copyOn(newConsoleClient(t, b))
		copyB.get("/console").wantStatus(t, http.StatusOK)

		admin := a.token("ops", auth.All)
		b.do(http.MethodDelete, "/api/tokens/"+tok.ID, "", bearer(admin)...).wantStatus(http.StatusNoContent)
		cc.get("/console").wantSignIn(t)
		copyB.get("/console").wantSignIn(t)
	})
}
