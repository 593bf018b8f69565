package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

// The gauges' read: the oldest pending delivery of an enabled endpoint
// (by when its window began), none once delivered; a disabled endpoint's
// pending deliveries are not counted, the endpoint is.
func TestStatsReadTheOldestPendingAndTheDisabled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{})
		down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusBadGateway })
		c := r.consumer("ca")
		ep := r.endpoint(c, down.url())
		if oldest, disabled, err := r.hooks.Stats(ctx); err != nil || !oldest.IsZero() || disabled != 0 {
			t.Fatalf("empty: %v, %d, %v", oldest, disabled, err)
		}
		r.license(c, "a.test")
		r.dispatch()
		start := r.clock.Now()
		r.clock.Advance(time.Minute)
		r.license(c, "b.test")
		r.dispatch()
		r.deliver()
		oldest, disabled, err := r.hooks.Stats(ctx)
		if err != nil || !oldest.Equal(start) || disabled != 0 {
			t.Fatalf("pending: %v, %d, %v; want %v, 0", oldest, disabled, err, start)
		}
		no := false
		r.update(c, ep.ID, EndpointPatch{Enabled: &no})
		if oldest, disabled, err := r.hooks.Stats(ctx); err != nil || !oldest.IsZero() || disabled != 1 {
			t.Errorf("disabled: %v, %d, %v; want none pending, 1 disabled", oldest, disabled, err)
		}
	})
}
