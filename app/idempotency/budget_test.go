package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

func TestWorkBudgetLeavesAFifthOfTheLease(t *testing.T) {
	for _, lease := range []time.Duration{time.Minute, 10 * time.Second, 5 * time.Millisecond} {
		if got, want := WorkBudget(lease), lease*4/5; got != want {
			t.Errorf("WorkBudget(%v) = %v, want %v", lease, got, want)
		}
	}
}

// Every path that runs owned work without a lease of its own (a write that
// carries no key, guarded or not) runs detached from the client and within
// one work budget: a client hanging up does not cancel it, and it cannot
// outlive a lease taken when it began.
func TestUnleasedWorkIsDetachedWithinTheBudget(t *testing.T) {
	const lease = time.Minute
	g := New(Config{LockTimeout: lease, Consumer: func(echo.Context) string { return "c1" }})
	for name, mw := range map[string]echo.MiddlewareFunc{
		"detached": g.Detached(),
		"keyless":  g.Middleware("op", Options{}),
	} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			var deadline time.Time
			var cancelled error
			clientCtx, hangUp := context.WithCancel(context.Background())
			e.POST("/x", func(c echo.Context) error {
				hangUp() // the client goes away mid-request
				deadline, _ = c.Request().Context().Deadline()
				cancelled = c.Request().Context().Err()
				return c.NoContent(http.StatusNoContent)
			}, mw)
			req := httptest.NewRequestWithContext(clientCtx, http.MethodPost, "/x", strings.NewReader("{}"))
			began := time.Now()
			e.ServeHTTP(httptest.NewRecorder(), req)
			if cancelled != nil {
				t.Errorf("the work was cancelled with the client: %v", cancelled)
			}
			if deadline.IsZero() || deadline.After(time.Now().Add(WorkBudget(lease))) || deadline.Before(began.Add(WorkBudget(lease))) {
				t.Errorf("deadline %v after start, want the work budget %v", deadline.Sub(began), WorkBudget(lease))
			}
		})
	}
}
