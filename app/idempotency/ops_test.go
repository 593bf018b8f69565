package idempotency

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
)

// runFunc is an operation's work as a test writes it.
type runFunc func(ctx context.Context) (Response, error)

// respondWith is work that answers r, with no effect described.
func respondWith(r Response) runFunc {
	return func(context.Context) (Response, error) { return r, nil }
}

// respond is work that answers status with body, of contentType ("" for none).
func respond(status int, contentType, body string) runFunc {
	h := map[string]string{}
	if contentType != "" {
		h[echo.HeaderContentType] = contentType
	}
	return respondWith(Response{Status: status, Headers: h, Body: []byte(body)})
}

// text is work that answers status with a plain-text body, as Echo's
// c.String writes one.
func text(status int, body string) runFunc {
	return respond(status, echo.MIMETextPlainCharsetUTF8, body)
}

// testOperation declares an operation for a test: Run is run, and Resume
// finishes nothing (the intent stays pending).
func testOperation(name string, run runFunc) Operation[struct{}] {
	return Operation[struct{}]{
		Name: name,
		Run:  func(ctx context.Context, _ *Execution, _ struct{}) (Response, error) { return run(ctx) },
		Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
			return Response{}, false, nil
		},
	}
}

// newTestGuard is a Guard on cfg serving ops.
func newTestGuard(t testing.TB, cfg Config, ops ...AnyOperation) *Guard {
	t.Helper()
	list, err := NewOperations(ops...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Operations = list
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// headerCall is a test request's Call: its consumer from X-Consumer (c1
// when none) and its request id from X-Request-Id.
func headerCall(c echo.Context) Caller {
	consumer := c.Request().Header.Get("X-Consumer")
	if consumer == "" {
		consumer = "c1"
	}
	return Caller{ConsumerID: consumer, RequestID: c.Request().Header.Get("X-Request-Id")}
}

// Handler is op's route on g for a test, as app/http serves one: the key
// from Idempotency-Key, the body read once, bind (none: the zero input and
// the whole body as the intent), and the answer written.
func (op Operation[In]) Handler(g *Guard, call func(echo.Context) Caller, bind ...func(body []byte) (In, []byte, error)) echo.HandlerFunc {
	g.MustServe(op)
	return func(c echo.Context) error {
		key, err := g.HeaderKey(c.Request().Header.Values(HeaderKey))
		if err != nil {
			return err
		}
		var body []byte
		if c.Request().Body != nil {
			if body, err = io.ReadAll(c.Request().Body); err != nil {
				return fmt.Errorf("%w: %w", ErrBodyUnreadable, err)
			}
		}
		b := func([]byte) (In, []byte, error) { var zero In; return zero, nil, nil }
		if len(bind) > 0 {
			b = bind[0]
		}
		resp, _, err := op.Serve(c.Request().Context(), g, Request{Caller: call(c), Method: c.Request().Method, Route: c.Path(), Key: key, Body: body}, b)
		if err != nil {
			return err
		}
		for name, v := range resp.Headers {
			c.Response().Header().Set(name, v)
		}
		if resp.Status == 0 {
			resp.Status = http.StatusOK
		}
		c.Response().WriteHeader(resp.Status)
		_, err = c.Response().Write(resp.Body)
		return err
	}
}

// Do is Do for any work, as a test's job writes it.
func (g *Guard) Do(ctx context.Context, sc scope, intent []byte, fn func(ctx context.Context) (Response, error)) (Response, bool, error) {
	return g.do(ctx, Caller{ConsumerID: sc.ConsumerID}, sc, intent, nil, func(ctx context.Context, _ *Execution) (Response, error) { return fn(ctx) })
}
