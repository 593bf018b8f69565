package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// from is a post's headers as a proxy forwards them for client.
func from(client string) []string { return []string{"X-Forwarded-For", client} }

// Posts without the sign-in form's CSRF token (no cookie, no _token) are
// refused as a stale form is, and count for nothing: a flood of them from
// an operator's address never locks the operator out.
func TestConsoleBareSignInPostsDoNotLockOutAnOperator(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		attacker := newConsoleClient(t, a)
		for i := range 3 * 10 { // three times the default limit
			attacker.post("/console/login", url.Values{"token": {fmt.Sprintf("guess-%d", i)}, "_token": {""}}).wantStatus(t, 419)
		}
		operator := newConsoleClientOn(t, attacker.srv) // the same address: both are 127.0.0.1
		operator.signIn(a.token("ops", auth.All))
		operator.get("/console").wantStatus(t, http.StatusOK)
	})
}

// Failed sign-ins count per address and per token tried: addresses taking
// turns at one token are stopped once the token has had its tries, while an
// address that spent its own tries locks out no other address.
func TestConsoleSignInCountsFailuresPerTokenAcrossAddresses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) {
			c.Console.LoginsPerMinute = 3
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // the test's clients reach it from loopback
		}))
		cc := newConsoleClient(t, a)
		victim := a.token("ops", auth.All)
		for i := range 3 {
			cc.trySignIn(badSignature(victim), from(fmt.Sprintf("203.0.113.%d", i))...).wantStatus(t, http.StatusUnauthorized)
		}
		page := cc.trySignIn(badSignature(victim), from("203.0.113.50")...).wantStatus(t, http.StatusTooManyRequests)
		if page.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %v", page.Header)
		}
		cc.trySignIn(victim, from("203.0.113.51")...).wantStatus(t, http.StatusTooManyRequests)
		// An address that tried the token once still signs in with another.
		cc.trySignIn(a.token("ops", auth.TokensManage), from("203.0.113.0")...).wantStatus(t, http.StatusSeeOther)

		// One address spends its tries on garbage: only it is stopped.
		spender := newConsoleClientOn(t, cc.srv)
		for range 3 {
			spender.trySignIn("wrong", from("198.51.100.7")...).wantStatus(t, http.StatusUnauthorized)
		}
		spender.trySignIn(a.token("ops", auth.All), from("198.51.100.7")...).wantStatus(t, http.StatusTooManyRequests)
		newConsoleClientOn(t, cc.srv).trySignIn(a.token("ops", auth.All), from("198.51.100.8")...).wantStatus(t, http.StatusSeeOther)

		clk.Advance(time.Minute)
		newConsoleClientOn(t, cc.srv).trySignIn(victim, from("203.0.113.50")...).wantStatus(t, http.StatusSeeOther)
		if logs := a.logs.String(); !strings.Contains(logs, `"by":"token"`) || strings.Contains(logs, victim) {
			t.Errorf("the token's refusal is logged by token, never with the token: %s", logs)
		}
	})
}

// X-Forwarded-For names the client only when the connection comes from a
// proxy TRUSTED_PROXIES names; from any other peer it is the client's own
// words, and the peer is the client: for the sign-in limit and the access
// log alike.
func TestConsoleForwardedForOnlyFromTrustedProxies(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		for _, tc := range []struct {
			name    string
			trusted string
			want    int    // the fourth attempt, from a fourth forwarded address
			client  string // the access log's client for it
		}{
			{"no proxy trusted", "", http.StatusTooManyRequests, "127.0.0.1"},
			{"another proxy trusted", "10.0.0.0/8", http.StatusTooManyRequests, "127.0.0.1"},
			{"the peer trusted", "10.0.0.0/8,127.0.0.1", http.StatusUnauthorized, "192.0.2.3"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := newApp(t, db, withConfig(func(c *config.Config) {
					c.Console.LoginsPerMinute = 3
					for p := range strings.SplitSeq(tc.trusted, ",") {
						if p != "" {
							pfx, err := netip.ParsePrefix(p)
							if err != nil {
								pfx = netip.PrefixFrom(netip.MustParseAddr(p), 32)
							}
							c.TrustedProxies = append(c.TrustedProxies, pfx)
						}
					}
				}))
				cc := newConsoleClient(t, a)
				for i := range 3 {
					cc.trySignIn("wrong", from(fmt.Sprintf("192.0.2.%d", i))...).wantStatus(t, http.StatusUnauthorized)
				}
				// A client's own X-Forwarded-For ahead of the proxy's entry: the proxy's entry decides.
				cc.trySignIn("wrong", from("10.9.9.9, 192.0.2.3")...).wantStatus(t, tc.want)
				if got := lastAccessClient(t, a.logs.String()); got != tc.client {
					t.Errorf("the access line's client is %q, want %q", got, tc.client)
				}
			})
		}
	})
}

// lastAccessClient is the client of the last access line ("request") in logs.
func lastAccessClient(t *testing.T, logs string) string {
	t.Helper()
	client := ""
	for line := range strings.SplitSeq(logs, "\n") {
		var l struct{ Msg, Client string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" {
			client = l.Client
		}
	}
	return client
}
