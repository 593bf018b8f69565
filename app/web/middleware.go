package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
)

// contentSecurityPolicy allows the console's own scripts, styles and images
// and nothing else: no inline script or style, no other origin, no frame.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders go on every console response: the routes' (through this
// middleware) and the error pages' (RenderError sets them too, for an error
// raised before a console route ran, such as a body over the limit).
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		setSecurityHeaders(c.Response().Header())
		return next(c)
	}
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	// A page may show a token once: no cache keeps it.
	h.Set(echo.HeaderCacheControl, "no-store")
}

// signedSession is a verified session and its token's principal, read
// afresh on this request.
type signedSession struct {
	session   session
	principal auth.Principal
}

// visit is one request of a signed-in operator, handed to a page as a value
// (never carried in the context under a key).
type visit struct {
	echo.Context
	signed signedSession
}

// actor is who a console action is in the audit trail: the session's
// token, as the API's actor is the bearer token, with the request's id.
func (v visit) actor() audit.Actor {
	p := v.signed.principal
	return audit.ByToken(p.ConsumerID, p.TokenID, requestID(v))
}

// errSignIn is the 401 of a console request without a live session: the
// error boundary sends a browser to the sign-in page.
var errSignIn = &pageError{http.StatusUnauthorized, "Sign in to continue."}

// errForbidden is the 403 of a page the session's token may not use: the
// same ability the matching API route asks.
var errForbidden = &pageError{http.StatusForbidden, "Your token does not carry the ability this page needs."}

// errNoPage is the 404 of a page whose path names an id no row can have.
var errNoPage = &pageError{http.StatusNotFound, "There is no such page."}

// errCSRF is the 419 Laravel answers a form posted without its CSRF token.
var errCSRF = &pageError{419, "Page Expired: the form was not sent with its security token. Reload the page and try again."}

// pageError is a refusal of the console's own, with the status and the
// message the page shows: app/http's error boundary reads them through
// StatusCode and PublicMessage.
type pageError struct {
	status  int
	message string
}

func (e *pageError) Error() string { return e.message }

// StatusCode is the response's status.
func (e *pageError) StatusCode() int { return e.status }

// PublicMessage is what the page says: written for the operator, safe to show.
func (e *pageError) PublicMessage() string { return e.message }

// page is the handler of a page behind a live session whose token holds
// ability (the matching API route's; "" for any console session). A form
// post must also carry the session's CSRF token and come from this site.
// Every path parameter must be an id (request.IsID), or the page is a 404
// before anything is read under it.
func (cn *Console) page(ability string, fn func(v visit) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		se, err := cn.sessionOf(c)
		if err != nil {
			if errors.Is(err, errNoSession) || errors.Is(err, auth.ErrUnauthenticated) {
				c.SetCookie(cn.sessions.cleared(sessionCookie))
				return errSignIn
			}
			return err
		}
		if cn.signedIn != nil {
			cn.signedIn(c, se.principal)
		}
		if c.Request().Method == http.MethodPost {
			if !sameSite(c.Request()) || !cn.sessions.validCSRF(sessionCSRF, se.session.Nonce, c.FormValue("_token")) {
				return errCSRF
			}
		}
		if ability != "" && !se.principal.Abilities.Can(ability) {
			return errForbidden
		}
		for i := range c.ParamNames() {
			if !request.IsID(c.ParamValues()[i]) {
				return errNoPage
			}
		}
		return fn(visit{Context: c, signed: se})
	}
}

func (cn *Console) sessionOf(c echo.Context) (signedSession, error) {
	ck, err := c.Cookie(sessionCookie)
	if err != nil {
		return signedSession{}, errNoSession
	}
	se, err := cn.sessions.decode(ck.Value)
	if err != nil {
		return signedSession{}, err
	}
	p, err := cn.cfg.Auth.Session(c.Request().Context(), se.ID, se.TokenID, se.ConsumerID)
	if err != nil {
		return signedSession{}, err
	}
	if !consoleAbilities(p.Abilities) {
		return signedSession{}, errNoSession
	}
	return signedSession{session: se, principal: p}, nil
}

// sameSite reports whether a form post came from this site, by the headers
// a browser sends: Sec-Fetch-Site decides where it is sent (every current
// browser sends it); where it is not, Origin must name this host, and an
// opaque origin ("null": a sandboxed frame, a data: page) is another
// site's. A client that sends neither is not a browser: the CSRF token
// alone decides for it.
func sameSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}

// consoleAbilities reports whether a token may open the console: an
// operator's token (tokens:manage, intents:manage or *), never a consumer's.
func consoleAbilities(a auth.Abilities) bool {
	return a.Can(auth.TokensManage) || a.Can(auth.IntentsManage)
}
