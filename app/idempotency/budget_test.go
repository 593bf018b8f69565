package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/tests/testdb"
)

func TestWorkBudgetLeavesAFifthOfTheLease(t *testing.T) {
	for _, lease := range []time.Duration{time.Minute, 10 * time.Second, 5 * time.Millisecond} {
		if got, want := WorkBudget(lease), lease*4/5; got != want {
			t.Errorf("WorkBudget(%v) = %v, want %v", lease, got, want)
		}
	}
}

// Owned work runs detached from the client and within one work budget: a
// client hanging up does not cancel it, and it cannot outlive the lease taken
// when it began. So runs a keyed write, and a keyless one (which holds an
// "auto:" record's lease).
func TestOwnedWorkIsDetachedWithinTheBudget(t *testing.T) {
	const lease = time.Minute
	var deadline time.Time
	var cancelled error
	var hangUp context.CancelFunc
	op := testOperation("op", func(ctx context.Context) (Response, error) {
		hangUp() // the client goes away mid-request
		deadline, _ = ctx.Deadline()
		cancelled = ctx.Err()
		return Response{Status: http.StatusNoContent}, nil
	})
	g := newTestGuard(t, Config{Store: NewStore(testdb.New(t, "sqlite").Gorm, testCipher(t)), LockTimeout: lease}, op)
	for name, key := range map[string]string{"keyed": "k-1", "keyless": ""} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			deadline, cancelled = time.Time{}, nil
			var clientCtx context.Context
			clientCtx, hangUp = context.WithCancel(context.Background())
			e.POST("/x", op.Handler(g, headerCall))
			req := httptest.NewRequestWithContext(clientCtx, http.MethodPost, "/x", strings.NewReader("{}"))
			if key != "" {
				req.Header.Set(HeaderKey, key)
			}
			began := time.Now()
			e.ServeHTTP(httptest.NewRecorder(), req)
			if cancelled != nil {
				t.Errorf("the work was cancelled with the client: %v", cancelled)
			}
			if deadline.IsZero() || deadline.After(time.Now().Add(WorkBudget(lease))) || deadline.Before(began.Add(WorkBudget(lease)-time.Second)) {
				t.Errorf("deadline %v after start, want the work budget %v", deadline.Sub(began), WorkBudget(lease))
			}
		})
	}
}
