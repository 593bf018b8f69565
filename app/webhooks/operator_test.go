package webhooks

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/tests/testdb"
)

// An operator sees and acts on every consumer's webhooks through the
// service as it is (the console, and an operator's page): ListEndpoints
// with no consumer lists every consumer's endpoints, oldest first;
// Deliveries with a status and no consumer lists every consumer's
// deliveries in it (a consumer narrows it); RetryDelivery with no consumer
// and no endpoint retries any consumer's delivery, by the console or by an
// operator's token, whose own consumer is not the delivery's: passed as the
// consumer, it finds nothing. Each retry is in the audit trail by its actor.
func TestOperatorViewAcrossConsumers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		ctx := context.Background()
		acme, globex := r.consumer("acme"), r.consumer("globex")
		down := func(int, http.ResponseWriter) int { return http.StatusInternalServerError }
		ea := r.endpoint(acme, newReceiver(t, down).url(), events.LicenseWildcard)
		eg := r.endpoint(globex, newReceiver(t, down).url(), events.LicenseWildcard)
		eu := r.endpoint(globex, newReceiver(t, nil).url(), events.LicenseWildcard)
		r.license(acme, "acme.test")
		r.license(globex, "globex.test")
		r.dispatch()
		r.deliver()
		// Their retry windows ended: the deliveries to the endpoints that never answer failed.
		must(t, db.Gorm.Model(&Delivery{}).Where("endpoint_id IN ?", []string{ea.ID, eg.ID}).
			Updates(map[string]any{"status": StatusFailed, "next_attempt_at": nil}).Error)

		eps, err := r.hooks.ListEndpoints(ctx, "")
		if err != nil || len(eps) != 3 || eps[0].ID != ea.ID || eps[1].ID != eg.ID || eps[2].ID != eu.ID {
			t.Fatalf("ListEndpoints(every consumer) = %+v, %v; want acme's and globex's, oldest first", eps, err)
		}
		failed, err := r.hooks.Deliveries(ctx, DeliveryQuery{Status: StatusFailed})
		if err != nil || failed.Total != 2 || len(failed.Deliveries) != 2 {
			t.Fatalf("failed deliveries of every consumer = %+v, %v; want acme's and globex's", failed, err)
		}
		byConsumer := map[string]DeliveryView{}
		for _, d := range failed.Deliveries {
			byConsumer[d.ConsumerID] = d
			if d.EventType != events.LicenseCreated || len(d.Attempts) == 0 || d.EventPublicID == "" {
				t.Errorf("failed delivery = %+v, want its event and its attempts", d)
			}
		}
		if one, err := r.hooks.Deliveries(ctx, DeliveryQuery{Status: StatusFailed, ConsumerID: globex}); err != nil || one.Total != 1 ||
			one.Deliveries[0].ID != byConsumer[globex].ID {
			t.Errorf("globex's failed deliveries = %+v, %v", one, err)
		}

		if _, err := r.hooks.RetryDelivery(ctx, audit.Console(), "", "", byConsumer[acme].ID); err != nil {
			t.Fatalf("the console's retry of acme's delivery: %v", err)
		}
		ops := audit.ByToken("ops", "01OPSTOKEN0000000000000000", "req-ops")
		if _, err := r.hooks.RetryDelivery(ctx, ops, ops.ConsumerID, "", byConsumer[globex].ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("a retry scoped to the operator's own consumer = %v, want ErrNotFound", err)
		}
		v, err := r.hooks.RetryDelivery(ctx, ops, "", "", byConsumer[globex].ID)
		if err != nil || v.Status != StatusPending || v.ConsumerID != globex || v.NextAttemptAt == nil {
			t.Fatalf("an operator token's retry of globex's delivery = %+v, %v; want it pending, due", v, err)
		}
		if left, err := r.hooks.Deliveries(ctx, DeliveryQuery{Status: StatusFailed}); err != nil || left.Total != 0 {
			t.Errorf("failed deliveries after the retries = %+v, %v; want none", left, err)
		}
		for id, want := range map[string]audit.Actor{byConsumer[acme].ID: audit.Console(), byConsumer[globex].ID: ops} {
			trail, _, err := audit.List(ctx, db.Gorm, audit.Filter{SubjectType: audit.SubjectWebhookDelivery, SubjectID: id})
			if err != nil || len(trail) != 1 || trail[0].Event != audit.WebhookDeliveryRetried || trail[0].Actor != want.Kind ||
				(want.TokenID != "" && (trail[0].ActorTokenID == nil || *trail[0].ActorTokenID != want.TokenID)) {
				t.Errorf("trail of %s = %+v, %v; want one retry by %s", id, trail, err, want.Kind)
			}
		}
	})
}
