package tests

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/client"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The Go client against the real server: webhook endpoints from creation
// to deletion, their deliveries and a retry, and the events feed read
// across pages by the iterator.
func TestClientWebhookEndpointsAndFeed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		srv := httptest.NewServer(a.e)
		t.Cleanup(srv.Close)
		c := client.New(srv.URL, a.token("acme", auth.WebhooksManage, auth.LicensesRead, auth.LicensesWrite))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		ep, err := c.CreateWebhookEndpoint(ctx, client.WebhookEndpointInput{URL: "https://shop.example/hooks", Description: "Shop"})
		if err != nil {
			t.Fatalf("create endpoint: %v", err)
		}
		if ep.ID == "" || len(ep.Secret) != len("whsec_")+64 || !ep.Enabled || len(ep.Events) != 1 || ep.Events[0] != "license.*" {
			t.Fatalf("endpoint = %+v, want an enabled license.* endpoint with its secret", ep)
		}
		domains := []string{"a.test", "b.test", "c.test"}
		for _, d := range domains {
			if _, err := c.CreateLicense(ctx, client.CreateLicenseInput{Name: "Acme", Domain: d}); err != nil {
				t.Fatalf("create license %s: %v", d, err)
			}
		}
		a.dispatch()

		var got []string
		var last string
		for ev, err := range c.Events(ctx, client.EventsQuery{PerPage: 2}) {
			if err != nil {
				t.Fatalf("feed: %v", err)
			}
			lic, err := ev.License()
			if err != nil || ev.Type != client.EventLicenseCreated {
				t.Fatalf("event %+v: %v, want license.created with its license", ev, err)
			}
			got = append(got, lic.Domain)
			last = ev.ID
		}
		if len(got) != 3 || got[0] != "a.test" || got[2] != "c.test" {
			t.Errorf("feed = %v, want the 3 creates in order across 2 pages", got)
		}
		if p, err := c.ListEvents(ctx, client.EventsQuery{After: last}); err != nil || len(p.Events) != 0 || p.HasMore || p.NextAfter != last {
			t.Errorf("feed after the last = %+v, %v; want empty, resuming from %s", p, err, last)
		}

		list, err := c.ListWebhookEndpoints(ctx)
		if err != nil || len(list) != 1 || list[0].ID != ep.ID || list[0].Secret != "" {
			t.Errorf("list = %+v, %v; want the one endpoint, without its secret", list, err)
		}
		off := false
		upd, err := c.UpdateWebhookEndpoint(ctx, ep.ID, client.WebhookEndpointUpdate{Enabled: &off})
		if err != nil || upd.Enabled || upd.DisabledAt == nil || upd.DisabledReason != "disabled by the consumer" {
			t.Errorf("disable = %+v, %v; want disabled by the consumer", upd, err)
		}
		if g, err := c.GetWebhookEndpoint(ctx, ep.ID); err != nil || g.Enabled || g.Description != "Shop" {
			t.Errorf("get = %+v, %v; want it disabled", g, err)
		}

		dp, err := c.ListWebhookDeliveries(ctx, ep.ID, "pending", 1, 2)
		if err != nil || dp.Total != 3 || len(dp.Deliveries) != 2 || dp.LastPage != 2 || dp.Deliveries[0].EndpointID != ep.ID {
			t.Fatalf("deliveries = %+v, %v; want 3 pending, 2 on the first page", dp, err)
		}
		d, err := c.RetryWebhookDelivery(ctx, ep.ID, dp.Deliveries[0].ID)
		if err != nil || d.ID != dp.Deliveries[0].ID || d.Status != "pending" {
			t.Errorf("retry = %+v, %v; want the delivery, pending", d, err)
		}

		if err := c.DeleteWebhookEndpoint(ctx, ep.ID); err != nil {
			t.Fatalf("delete: %v", err)
		}
		var apiErr *client.APIError
		if _, err := c.GetWebhookEndpoint(ctx, ep.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Errorf("get after delete: %v, want 404", err)
		}
		if err := c.DeleteWebhookEndpoint(ctx, ep.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Errorf("delete again (no lost answer): %v, want 404", err)
		}
		if _, err := c.GetOperation(ctx, "01JDQ8Z5Y3K1V7R9T2M4N6P8QA"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Errorf("unknown operation: %v, want 404", err)
		}
	})
}
