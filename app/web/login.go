package web

import (
	"errors"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

type loginPage struct {
	Next  string // where to go once signed in
	Error string
}

// showLogin is GET /console/login: the sign-in form, or the dashboard for a
// browser signed in already. The form's CSRF token is tied to a cookie of
// its own, as there is no session yet.
func (cn *Console) showLogin(c echo.Context) error {
	if _, err := cn.sessionOf(c); err == nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return cn.renderLogin(c, http.StatusOK, loginPage{Next: safeNext(c.QueryParam("next"))})
}

func (cn *Console) renderLogin(c echo.Context, status int, p loginPage) error {
	secret := ""
	if ck, err := c.Cookie(loginCookie); err == nil && len(ck.Value) >= 32 {
		secret = ck.Value
	} else {
		secret = randomToken()
		ck := cn.sessions.newCookie(loginCookie, secret, 3600)
		c.SetCookie(ck)
	}
	return cn.render(c, status, "login", view{Title: "Sign in", CSRF: cn.sessions.csrf(loginCSRF, secret), Data: p})
}

// login is POST /console/login {token, _token, next}: an operator's token
// (tokens:manage, intents:manage or *) opens a session; any other token, or
// none, is refused with the same words, logged without the token. A post
// without the form's CSRF token is refused first and counts for nothing, so
// that bare posts cannot lock an address out; the others count as failed
// sign-ins per client address and per token tried (loginLimiter).
func (cn *Console) login(c echo.Context) error {
	addr := clientAddr(c)
	ck, err := c.Cookie(loginCookie)
	if err != nil || !sameSite(c.Request()) || !cn.sessions.validCSRF(loginCSRF, ck.Value, c.FormValue("_token")) {
		cn.cfg.Log.Warn("console sign-in refused", "reason", "csrf", "client", addr, "request_id", requestID(c))
		return errCSRF
	}
	next := safeNext(c.FormValue("next"))
	raw := strings.TrimSpace(c.FormValue("token"))
	tried := auth.ClaimedID(raw)
	if r := cn.logins.take(addr, tried); r != nil {
		if r.first {
			cn.cfg.Log.Warn("console sign-in refused", "reason", "too many attempts", "by", r.by, "client", addr,
				"token_id", tried, "request_id", requestID(c))
		}
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(r.retryAfter.Seconds())+1))
		return cn.renderLogin(c, http.StatusTooManyRequests, loginPage{Next: next,
			Error: "Too many sign-in attempts. Wait a minute and try again."})
	}
	p, err := cn.cfg.Auth.Verify(c.Request().Context(), raw)
	if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
		cn.logins.forgive(addr, tried) // the database failed, not the operator
		return err
	}
	if err != nil || !consoleAbilities(p.Abilities) {
		reason := "unauthenticated"
		if err == nil {
			reason = "not an operator token"
		}
		cn.cfg.Log.Warn("console sign-in refused", "reason", reason, "client", addr, "token_id", p.TokenID, "request_id", requestID(c))
		return cn.renderLogin(c, http.StatusUnauthorized, loginPage{Next: next,
			Error: "This token cannot open the console: paste a live token that holds *, tokens:manage or intents:manage."})
	}
	cn.logins.forgive(addr, tried)
	se := cn.sessions.open(p.TokenID, p.ConsumerID, p.ExpiresAt, cn.cfg.SessionTTL)
	if se.ID, err = cn.cfg.Auth.OpenSession(c.Request().Context(), p, se.end()); err != nil {
		return err
	}
	c.SetCookie(cn.sessions.cookie(se))
	c.SetCookie(cn.sessions.cleared(loginCookie))
	cn.cfg.Log.Info("console sign-in", "token_id", p.TokenID, "consumer_id", p.ConsumerID, "client", addr, "request_id", requestID(c))
	return c.Redirect(http.StatusSeeOther, next)
}

// logout is POST /console/logout: the session's row is deleted, so its
// cookie opens nothing after, on any replica, copies of it included; the
// browser's cookie is cleared too.
func (cn *Console) logout(c visit) error {
	if err := cn.cfg.Auth.EndSession(c.Request().Context(), c.signed.session.ID); err != nil {
		return err
	}
	c.SetCookie(cn.sessions.cleared(sessionCookie))
	return c.Redirect(http.StatusSeeOther, Prefix+"/login")
}

// safeNext is where to send a browser after signing in: a console path of
// this site, never another site's ("//evil", "/\\evil", "https://…").
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, Prefix+"/login") {
		return Prefix
	}
	if rest := next[len(Prefix):]; rest != "" && rest[0] != '/' && rest[0] != '?' {
		return Prefix
	}
	p, query, _ := strings.Cut(next, "?")
	if path.Clean(p) != p && path.Clean(p)+"/" != p { // "/console/../api/tokens": a console path in name only
		return Prefix
	}
	if query != "" {
		return p + "?" + query
	}
	return p
}

// clientAddr is the address Echo's IPExtractor decided (the peer without one),
// never a header a client may write. An IPv6 address counts as its /64, the
// block one host is given.
func clientAddr(c echo.Context) string {
	host := ""
	if c.Echo() != nil && c.Echo().IPExtractor != nil {
		host = c.RealIP()
	} else {
		host = echo.ExtractIPDirect()(c.Request())
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return host
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}
