package idempotency

import (
	"context"
	"testing"

	"github.com/labstack/echo/v4"
)

// runFunc is an operation's work as a test writes it.
type runFunc func(ctx context.Context) (Response, Outcome, error)

// respondWith is work that answers r, with no effect described.
func respondWith(r Response) runFunc {
	return func(context.Context) (Response, Outcome, error) { return r, Outcome{}, nil }
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
		Run:  func(ctx context.Context, _ Call, _ struct{}) (Response, Outcome, error) { return run(ctx) },
		Resume: func(context.Context, Call, *Record, bool) (Resumption, error) {
			return Resumption{}, nil
		},
	}
}

// newTestGuard is a Guard on cfg serving ops.
func newTestGuard(t testing.TB, cfg Config, ops ...Declared) *Guard {
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
func headerCall(c echo.Context) Call {
	consumer := c.Request().Header.Get("X-Consumer")
	if consumer == "" {
		consumer = "c1"
	}
	return Call{ConsumerID: consumer, RequestID: c.Request().Header.Get("X-Request-Id")}
}
