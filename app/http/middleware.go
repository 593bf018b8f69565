package http

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

const headerRequestID = "X-Request-Id" // canonical: the header map is indexed with it

// headAsGet serves HEAD on every GET route, as Laravel's router matches GET
// routes for HEAD: the request is routed and handled as the GET it stands
// for (errors included), its answer kept back, and then only the headers
// are sent: the GET's status, Content-Type and Content-Length, no body.
// Echo routes on the request's own method, so that is set to GET for the
// handlers and back to HEAD before anything is written, for net/http.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Method != http.MethodHead {
			return next(c)
		}
		req.Method = http.MethodGet
		res := c.Response()
		hw := &headWriter{w: res.Writer}
		res.Writer = hw
		err := next(c)
		if err != nil && !res.Committed {
			c.Error(err)
		}
		req.Method = http.MethodHead
		res.Writer = hw.w
		hw.send()
		return nil
	}
}

// trimTrailingSlash routes a path with a trailing slash as the path
// without it ("/api/licenses/" is "/api/licenses"), as Laravel's router
// does, before routing and with no redirect; the root stays "/".
func trimTrailingSlash(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		if u.RawPath != "" { // an escaped path: trimmed as sent, the decoded path read from it
			if trimmed := strings.TrimRight(u.RawPath, "/"); trimmed != u.RawPath && trimmed != "" {
				if p, err := url.PathUnescape(trimmed); err == nil {
					u.RawPath, u.Path = trimmed, p
				}
			}
		} else if len(u.Path) > 1 && strings.HasSuffix(u.Path, "/") {
			if u.Path = strings.TrimRight(u.Path, "/"); u.Path == "" {
				u.Path = "/"
			}
		}
		return next(c)
	}
}

// requestMethod is the method the client sent: HEAD for a HEAD served as
// its GET, which headAsGet's writer tells.
func requestMethod(c echo.Context) string {
	if _, head := c.Response().Writer.(*headWriter); head {
		return http.MethodHead
	}
	return c.Request().Method
}

// headWriter keeps a HEAD's answer back: it counts the body instead of
// sending it, and send writes the status with the body's Content-Length.
type headWriter struct {
	w      http.ResponseWriter
	status int
	n      int
}

func (h *headWriter) Header() http.Header { return h.w.Header() }

// Flush does nothing: nothing is sent before send.
func (h *headWriter) Flush() {}

func (h *headWriter) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *headWriter) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	h.n += len(b)
	return len(b), nil
}

// send writes the kept status, with the Content-Length the GET would have
// had when it had a body and named no length of its own.
func (h *headWriter) send() {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	if h.n > 0 && h.w.Header().Get(echo.HeaderContentLength) == "" {
		h.w.Header().Set(echo.HeaderContentLength, strconv.Itoa(h.n))
	}
	h.w.WriteHeader(h.status)
}

// saneRequestID reports whether an X-Request-Id is kept as the caller sent
// it: 1–128 visible characters from a safe set ([A-Za-z0-9._:-]).
func saneRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// requestID keeps the caller's X-Request-Id when it is sane and makes a
// new one otherwise. The response's header is where it is kept (RequestID
// reads it there): every request has one, so nothing more is allocated
// for it.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(headerRequestID)
		if !saneRequestID(id) {
			id = ulid.Make().String()
		}
		c.Response().Header()[headerRequestID] = []string{id} // the canonical name: Set without its check
		return next(c)
	}
}

// defaultCacheControl is what Symfony's ResponseHeaderBag sends on a
// response that sets no cache header of its own, so on every Laravel answer.
const defaultCacheControl = "no-cache, private"

// cacheControl gives every response Laravel's default Cache-Control before
// the handler runs; a handler (or an error) that sets its own replaces it.
func cacheControl(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header()[echo.HeaderCacheControl] = []string{defaultCacheControl} // the canonical name: Set without its check
		return next(c)
	}
}

// RequestID returns the id of the request being served: the X-Request-Id
// its answer carries (requestID).
func RequestID(c echo.Context) string {
	if v := c.Response().Header()[headerRequestID]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// loggedContext is a request as the access log sees it: Echo's context, and
// what the idempotency guard decided for a guarded route (noteIdempotency),
// carried as a value, not under a string key.
type loggedContext struct {
	echo.Context
	idempotency []slog.Attr
}

var _ echo.Context = (*loggedContext)(nil)

// noteIdempotency keeps the guard's decision for the request's log line.
func noteIdempotency(c echo.Context, n []slog.Attr) {
	if lc, ok := c.(*loggedContext); ok {
		lc.idempotency = n
	}
}

// accessLog writes one line per request, with the idempotency outcome of a
// guarded one: never headers, bodies or query strings, which may carry
// secrets.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		start := time.Now()
		c := &loggedContext{Context: ec}
		err := next(c)
		if err != nil {
			c.Error(err) // write the error response now, so its status is logged
		}
		status := c.Response().Status
		s.metrics.ObserveHTTP(c.Path(), requestMethod(c), status, time.Since(start))
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if !s.log.Enabled(c.Request().Context(), level) {
			return nil // no line at this level: nothing to build
		}
		attrs := []slog.Attr{
			slog.String("method", requestMethod(c)),
			slog.String("route", c.Path()),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
			slog.String("request_id", RequestID(c)),
			slog.String("client", c.RealIP()),
		}
		if p := principal(c); p.TokenID != "" { // who asked, for every authenticated request (never the token itself)
			attrs = append(attrs, slog.String("consumer_id", p.ConsumerID), slog.String("token_id", p.TokenID))
		}
		if a := c.idempotency; a != nil {
			attrs = append(attrs, slog.Attr{Key: "idempotency", Value: slog.GroupValue(a...)})
		}
		s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
		return nil
	}
}

// recoverPanic turns a panic into a 500 and logs the stack for the operator;
// the client sees only "Server Error".
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic", "request_id", RequestID(c), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = errInternal
			}
		}()
		return next(c)
	}
}

// bodyLimit caps request bodies: a declared length over the limit is refused
// at once, and a body that turns out longer fails when it is read.
func bodyLimit(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// An absent body (http.NoBody) is wrapped too: formBodies tells
			// an empty form from no body by it, as Laravel answers an empty
			// form 422 and not 415.
			if limit <= 0 {
				return next(c)
			}
			req := c.Request()
			if req.ContentLength > limit {
				return errTooLarge
			}
			req.Body = &limitedBody{rc: req.Body, left: limit}
			return next(c)
		}
	}
}

// limitedBody reads at most left bytes and then fails with errTooLarge.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// cors is Laravel 12's HandleCors with the default config/cors.php on
// api/*: allowed_origins from CORS_ALLOWED_ORIGINS (default *),
// allowed_methods and allowed_headers *, no exposed headers, max_age 0, no
// credentials. It mirrors fruitcake/php-cors' CorsService header for
// header: a preflight (OPTIONS with Access-Control-Request-Method) is
// answered 204 here, before routing, with the request's method and headers
// echoed back; every other api/* answer, errors included, gets
// Access-Control-Allow-Origin. With * it is "*" on every answer; with one
// origin, that origin on every answer; with several (or a pattern such as
// https://*.example.com), the request's Origin when it is one of them,
// and Vary: Origin always.
type cors struct {
	all      bool
	origins  []string
	patterns []*regexp.Regexp
}

// newCORS reads the allowed origins as CorsService normalises them: "*"
// among them allows all; one with a * is a pattern.
func newCORS(origins []string) *cors {
	c := &cors{}
	if len(origins) == 0 {
		origins = []string{"*"}
	}
	for _, o := range origins {
		switch {
		case o == "*":
			c.all = true
		case strings.Contains(o, "*"):
			c.patterns = append(c.patterns, regexp.MustCompile("^"+strings.ReplaceAll(regexp.QuoteMeta(o), `\*`, ".*")+"$"))
		default:
			c.origins = append(c.origins, o)
		}
	}
	return c
}

// middleware applies the CORS headers to api/* requests.
func (co *cors) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if !strings.HasPrefix(req.URL.Path, "/api/") {
			return next(c)
		}
		h := c.Response().Header()
		if req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" {
			if co.allowOrigin(h, req) {
				h.Set("Access-Control-Allow-Methods", strings.ToUpper(req.Header.Get("Access-Control-Request-Method")))
				vary(h, "Access-Control-Request-Method")
				h.Set("Access-Control-Allow-Headers", req.Header.Get("Access-Control-Request-Headers"))
				vary(h, "Access-Control-Request-Headers")
				h.Set("Access-Control-Max-Age", "0")
			}
			vary(h, "Access-Control-Request-Method")
			return c.NoContent(http.StatusNoContent)
		}
		if req.Method == http.MethodOptions {
			vary(h, "Access-Control-Request-Method")
		}
		co.allowOrigin(h, req)
		return next(c)
	}
}

// allowOrigin is CorsService::configureAllowedOrigin; it reports whether
// Access-Control-Allow-Origin was set.
func (co *cors) allowOrigin(h http.Header, req *http.Request) bool {
	origin := req.Header.Get("Origin")
	switch {
	case co.all:
		h.Set(echo.HeaderAccessControlAllowOrigin, "*")
	case len(co.origins) == 1 && len(co.patterns) == 0:
		h.Set(echo.HeaderAccessControlAllowOrigin, co.origins[0])
	default:
		allowed := origin != "" && (slices.Contains(co.origins, origin) || slices.ContainsFunc(co.patterns, func(p *regexp.Regexp) bool { return p.MatchString(origin) }))
		if allowed {
			h.Set(echo.HeaderAccessControlAllowOrigin, origin)
		}
		vary(h, "Origin")
	}
	return h.Get(echo.HeaderAccessControlAllowOrigin) != ""
}

// vary adds name to the Vary header once, as CorsService::varyHeader does
// ("Origin, Access-Control-Request-Method").
func vary(h http.Header, name string) {
	v := h.Get(echo.HeaderVary)
	if v == "" {
		h.Set(echo.HeaderVary, name)
		return
	}
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) == name {
			return
		}
	}
	h.Set(echo.HeaderVary, v+", "+name)
}
