package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// VendorConsumer is the consumer the vendor's events are recorded under:
// none, beside (never among) the consumers' own intents.
const VendorConsumer = idempotency.SystemConsumer

// Received is the answer to every event taken: applied now, applied before,
// or of a type licensor does not act on.
var Received = idempotency.Response{Status: http.StatusOK,
	Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"received":true}`)}

// ErrNotAnEvent is ParseVendorEvent's answer to a body that is not a
// vendor event.
var ErrNotAnEvent = errors.New("the body is not a vendor event")

// vendorEvent applies one of the vendor's events to the license of its site.
// Its intent is the event's body, so a pending one (whose owner died) is
// finished from the record alone.
func vendorEvent(svc *licenses.Service) idempotency.Operation[licenses.VendorEvent] {
	apply := func(ctx context.Context, ev licenses.VendorEvent) (idempotency.Response, idempotency.Outcome, error) {
		o := idempotency.Outcome{ResourceType: "site", ExternalRef: ev.Site.ID}
		_, err := svc.ApplyVendorEvent(ctx, ev)
		if errors.Is(err, licenses.ErrUnknownEventType) {
			err = nil // taken, not acted on: the vendor may add types
		}
		if err != nil {
			return idempotency.Response{}, o, err
		}
		return Received, o, nil
	}
	return idempotency.Operation[licenses.VendorEvent]{
		Name: "webhooks.vendor",
		Run: func(ctx context.Context, call idempotency.Call, ev licenses.VendorEvent) (idempotency.Response, idempotency.Outcome, error) {
			// Started first: an owner that dies mid-apply leaves an event the
			// reconciler applies from the record, not one it abandons.
			if err := call.Started(ctx); err != nil {
				return idempotency.Response{}, idempotency.Outcome{ResourceType: "site", ExternalRef: ev.Site.ID}, err
			}
			return apply(ctx, ev)
		},
		Resume: func(ctx context.Context, _ idempotency.Call, rec *idempotency.Record, _ bool) (idempotency.Resumption, error) {
			ev, err := ParseVendorEvent(rec.RequestBody)
			if err != nil {
				return idempotency.Resumption{}, fmt.Errorf("%w: stored event: %w", idempotency.ErrAbandon, err)
			}
			resp, o, err := apply(ctx, ev)
			if err != nil {
				return idempotency.Resumption{}, err
			}
			return idempotency.Resumption{Done: true, Response: resp, Outcome: o}, nil
		},
	}
}

// ParseVendorEvent reads a vendor webhook's body: an event with an id, a
// type, a creation time and a site with an id; ErrNotAnEvent otherwise.
func ParseVendorEvent(body []byte) (licenses.VendorEvent, error) {
	var ev vendorproto.Event
	if json.Unmarshal(body, &ev) != nil || ev.ID == "" || ev.Type == "" || ev.Created <= 0 || ev.Data.Site == nil || ev.Data.Site.ID == "" {
		return licenses.VendorEvent{}, ErrNotAnEvent
	}
	site := ev.Data.Site
	return licenses.VendorEvent{
		ID: ev.ID, Type: ev.Type, At: time.Unix(ev.Created, 0),
		Site: licenses.Site{ID: site.ID, Name: site.Name, Domain: site.Domain, LicenseKey: site.LicenseKey, Status: site.Status},
	}, nil
}
