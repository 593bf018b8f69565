// Package web is the operator console: server-rendered pages under
// /console, served by `serve` beside the API, behind a session opened with
// an operator's token. It is Laravel's web middleware group in Go: a signed
// session cookie, CSRF on every form, and pages that ask the same abilities
// as the API routes they mirror. Templates and assets are embedded; there is
// no build step and nothing is loaded from another origin.
//
// Errors are not rendered here: handlers return them, and app/http's one
// error boundary maps them to a status and a message, then asks the console
// (RenderError) to write the page for a path it owns.
package web

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/operations"
	"github.com/licensor-api/licensor/app/webhooks"
)

// Prefix is the path the console is served under.
const Prefix = "/console"

// Config is what the console needs; main fills it in.
type Config struct {
	// Auth verifies the token an operator signs in with, and the session's
	// token on every request after. Required.
	Auth *auth.Service
	// Intents is the idempotency store: the intents' pages (list, show,
	// retry, discard) and the dashboard's counts.
	Intents *idempotency.Store
	// Operations are the guarded operations the guard declares: their names
	// (the intents' filter) and the ones that may only be retried, never
	// discarded.
	Operations *idempotency.Operations
	// Guard discards an intent, once the vendor keeps nothing for it that
	// nobody holds. Required.
	Guard *idempotency.Guard
	// Guarded are the API's guarded operations, which a page runs on a
	// consumer's behalf (a license's Rotate key).
	Guarded operations.Set
	// Licenses is the licenses' service: search, one license, its audit trail.
	Licenses *licenses.Service
	// Events is the consumer events' log: a license's events.
	Events *events.Log
	// Webhooks are the consumers' webhook endpoints and their deliveries.
	Webhooks *webhooks.Service
	// Activity is the hourly counts licensor keeps: the dashboard's charts
	// and the last drift check's mismatches.
	Activity *activity.Recorder
	// Key is APP_KEY's 32 bytes: the session and CSRF signatures are keyed by
	// a key derived from it (a new APP_KEY signs every operator out).
	Key []byte
	// Secure marks the session cookie Secure (every environment but local,
	// which is served over plain http on 127.0.0.1).
	Secure bool
	// SessionTTL bounds a session; it also ends when its token expires or is
	// revoked. Zero: DefaultSessionTTL.
	SessionTTL time.Duration
	// LoginsPerMinute bounds the failed sign-ins of one client address, and
	// of one token tried, a minute (zero: DefaultLoginsPerMinute).
	LoginsPerMinute int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives failed sign-ins (never the token pasted).
	Log *slog.Logger
	// Version is shown in the footer.
	Version string
}

// DefaultSessionTTL is how long a console session lasts at most.
const DefaultSessionTTL = 8 * time.Hour

// DefaultLoginsPerMinute is how many failed sign-ins one client address,
// and one token tried, may make a minute.
const DefaultLoginsPerMinute = 10

// Console serves the operator console's pages.
type Console struct {
	cfg      Config
	sessions sessions
	logins   *loginLimiter
	forms    *onceSet // the issue forms already sent
	pages    *pages
	// signedIn names the session's token on the request's access line (the
	// HTTP layer's hook, set by Mount).
	signedIn func(c echo.Context, p auth.Principal)
}

// New builds the console from cfg.
func New(cfg Config) *Console {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.LoginsPerMinute <= 0 {
		cfg.LoginsPerMinute = DefaultLoginsPerMinute
	}
	return &Console{
		cfg:      cfg,
		sessions: sessions{key: mac(cfg.Key, "licensor console session v1"), secure: cfg.Secure, now: cfg.Now},
		logins:   newLoginLimiter(cfg.LoginsPerMinute, cfg.Now),
		forms:    newOnceSet(cfg.Now),
		pages:    mustParsePages(),
	}
}

// Owns reports whether path is one of the console's.
func (*Console) Owns(path string) bool {
	return path == Prefix || strings.HasPrefix(path, Prefix+"/")
}

// consumerID is the id of the consumer a filter names (normalised as the
// API normalises it), "" when it names none; found is false when no
// consumer has that name, which a list shows as nothing, as the API's lists
// do.
func (cn *Console) consumerID(ctx context.Context, name string) (id string, found bool, err error) {
	if name == "" {
		return "", true, nil
	}
	consumer, err := cn.cfg.Auth.ConsumerNamed(ctx, name)
	if errors.Is(err, auth.ErrConsumerNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return consumer.ID, true, nil
}
