package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// VendorConsumer is the consumer the vendor's events are recorded under.
const VendorConsumer = idempotency.SystemConsumer

// Received is the answer to every event taken, acted on or not.
var Received = idempotency.Response{Status: http.StatusOK,
	Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"received":true}`)}

// ErrNotAnEvent is ParseVendorEvent's answer to anything else.
var ErrNotAnEvent = errors.New("the body is not a vendor event")

// vendorEvent applies one of the vendor's events to the license of its
// site. Its intent is the event's body, so the reconciler finishes a pending
// one from the record alone; it starts at once, so that an owner that dies
// mid-apply leaves an event to apply, not one to abandon.
func vendorEvent(svc *licenses.Service) idempotency.Operation[licenses.VendorEvent] {
	apply := func(ctx context.Context, x *idempotency.Execution, ev licenses.VendorEvent) (idempotency.Response, error) {
		_, err := x.Finish(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
			_, err := svc.ApplyVendorEvent(ctx, tx, ev)
			if errors.Is(err, licenses.ErrUnknownEventType) {
				err = nil // taken, not acted on: the vendor may add types
			}
			return received(ev), err
		})
		return received(ev), err
	}
	return idempotency.Operation[licenses.VendorEvent]{
		Name: "webhooks.vendor",
		Run: func(ctx context.Context, x *idempotency.Execution, ev licenses.VendorEvent) (idempotency.Response, error) {
			if err := x.Start(ctx); err != nil {
				return received(ev), err
			}
			return apply(ctx, x, ev)
		},
		Resume: func(ctx context.Context, x *idempotency.Execution, rec *idempotency.Record, _ bool) (idempotency.Response, bool, error) {
			ev, err := ParseVendorEvent(rec.RequestBody)
			if err != nil {
				return idempotency.Response{}, false, fmt.Errorf("%w: stored event: %w", idempotency.ErrAbandon, err)
			}
			resp, err := apply(ctx, x, ev)
			return resp, err == nil, err
		},
	}
}

func received(ev licenses.VendorEvent) idempotency.Response {
	resp := Received
	resp.ResourceType, resp.ExternalRef = "site", ev.Site.ID
	return resp
}

// ParseVendorEvent reads a vendor webhook's body: an event with an id, a
// type, a creation time and a site with an id.
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
