package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// sessionCookie is the console session's cookie; loginCookie holds the CSRF
// secret of the sign-in form, before there is a session.
const (
	sessionCookie = "licensor_console"
	loginCookie   = "licensor_console_login"
)

// session is what the signed cookie says, never the token string itself.
// The session's row and the token's are read on every request, so signing out
// or revoking the token ends it at once.
type session struct {
	ID         string `json:"s"` // its console_sessions row
	TokenID    string `json:"t"`
	ConsumerID string `json:"c"`
	Issued     int64  `json:"i"` // unix seconds
	Expires    int64  `json:"e"` // unix seconds
	// Nonce is the session's own secret; its CSRF token is derived from it.
	Nonce string `json:"n"`
}

// errNoSession covers every reason a cookie is no session: absent,
// malformed, forged, or past its time.
var errNoSession = errors.New("no console session")

// sessions signs and reads session cookies.
type sessions struct {
	key    []byte
	secure bool
	now    func() time.Time
}

// open makes a session for the token, ending at ttl from now or when the
// token expires, whichever comes first; id is its row, recorded by the
// caller for that end (the session's Expires, to the second).
func (s sessions) open(tokenID, consumerID string, tokenExpires time.Time, ttl time.Duration) session {
	now := s.now()
	end := now.Add(ttl)
	if !tokenExpires.IsZero() && tokenExpires.Before(end) {
		end = tokenExpires
	}
	return session{TokenID: tokenID, ConsumerID: consumerID, Issued: now.Unix(), Expires: end.Unix(), Nonce: randomToken()}
}

func (se session) end() time.Time { return time.Unix(se.Expires, 0) }

// encode is the cookie value of se: its JSON and an HMAC-SHA256 of it, both
// base64url, joined by a dot.
func (s sessions) encode(se session) string {
	payload, _ := json.Marshal(se) // a struct of strings and ints: cannot fail
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(s.key, "session|"+p))
}

// decode checks the signature first, in constant time.
func (s sessions) decode(value string) (session, error) {
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, errNoSession
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(s.key, "session|"+p)) {
		return session{}, errNoSession
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return session{}, errNoSession
	}
	var se session
	if err := json.Unmarshal(payload, &se); err != nil || se.ID == "" || se.TokenID == "" || se.Nonce == "" {
		return session{}, errNoSession
	}
	if now := s.now().Unix(); now >= se.Expires || se.Issued > now+60 {
		return session{}, errNoSession
	}
	return se, nil
}

// The purposes a CSRF token is derived for: a session's forms, and the
// sign-in form (before there is a session). A token of one is never one of
// the other, whatever secret a client brings to the sign-in page.
const (
	sessionCSRF = "session-csrf|"
	loginCSRF   = "login-csrf|"
)

// csrf is the CSRF token of a secret for purpose (a session's nonce, or the
// sign-in form's cookie): derived, so it needs no storage, and useless with
// another session.
func (s sessions) csrf(purpose, secret string) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.key, purpose+secret))
}

func (s sessions) validCSRF(purpose, secret, token string) bool {
	return secret != "" && token != "" && hmac.Equal([]byte(token), []byte(s.csrf(purpose, secret)))
}

// mac is msg's HMAC-SHA256 under key. The sessions' key is one of its own,
// derived from APP_KEY this way: the console never signs with APP_KEY
// itself, which signs the tokens.
func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// cookie is the session's cookie: HttpOnly, SameSite=Strict, Secure outside
// local, scoped to the console's path, gone when the session ends.
func (s sessions) cookie(se session) *http.Cookie {
	return s.newCookie(sessionCookie, s.encode(se), int(se.Expires-s.now().Unix()))
}

func (s sessions) cleared(name string) *http.Cookie {
	return s.newCookie(name, "", -1)
}

func (s sessions) newCookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
