package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/tests/testdb"
)

// dispatch numbers the committed events for the feed and owes them to the
// endpoints, as the worker in serve does every WEBHOOK_POLL_INTERVAL.
func (a *app) dispatch() {
	a.t.Helper()
	if _, err := a.app.Webhooks.Dispatch(context.Background()); err != nil {
		a.t.Fatalf("dispatch: %v", err)
	}
}

// feedPage is one answer of GET /api/events.
type feedPage struct {
	Data  []json.RawMessage `json:"data"`
	Links struct {
		Next *string `json:"next"`
	} `json:"links"`
	Meta struct {
		PerPage   int     `json:"per_page"`
		HasMore   bool    `json:"has_more"`
		NextAfter *string `json:"next_after"`
	} `json:"meta"`
}

// feedEvent is what the tests read of an event.
type feedEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Sequence uint64 `json:"sequence"`
	Data     struct {
		License struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"license"`
	} `json:"data"`
}

// feed reads GET /api/events with the query ("" for none).
func (a *app) feed(token []string, query string) feedPage {
	a.t.Helper()
	path := "/api/events"
	if query != "" {
		path += "?" + query
	}
	r := a.do(http.MethodGet, path, "", token...).wantStatus(http.StatusOK)
	var p feedPage
	if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
		a.t.Fatalf("feed body: %v: %s", err, r.Body.String())
	}
	return p
}

// events decodes the page's events.
func (p feedPage) events(t *testing.T) []feedEvent {
	t.Helper()
	out := make([]feedEvent, len(p.Data))
	for i, raw := range p.Data {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, raw)
		}
	}
	return out
}

func eventTypes(evs []feedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func TestEventsFeedListsTheConsumersLicenseChangesInOrder(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)

		// Not dispatched yet: not in the feed.
		if p := a.feed(acme, ""); len(p.Data) != 0 || p.Meta.NextAfter != nil || p.Meta.HasMore || p.Links.Next != nil {
			t.Fatalf("feed before the dispatch = %+v, want nothing", p)
		}
		a.dispatch()

		p := a.feed(acme, "")
		evs := p.events(t)
		if got := strings.Join(eventTypes(evs), ","); got != "license.created,license.revoked" {
			t.Fatalf("types = %s, want license.created,license.revoked", got)
		}
		for i, e := range evs {
			if e.Sequence != uint64(i+1) || e.Data.License.ID != id {
				t.Errorf("event %d = %+v, want sequence %d of license %s", i, e, i+1, id)
			}
			if !strings.HasPrefix(e.ID, events.IDPrefix) {
				t.Errorf("event id %q is not an evt_ id", e.ID)
			}
		}
		if evs[1].Data.License.Status != "revoked" {
			t.Errorf("the revoked event's license is %q, want revoked", evs[1].Data.License.Status)
		}
		if p.Meta.HasMore || p.Links.Next != nil || p.Meta.PerPage != 50 {
			t.Errorf("meta = %+v, links.next = %v: want the default 50 and no more", p.Meta, p.Links.Next)
		}
		if p.Meta.NextAfter == nil || *p.Meta.NextAfter != evs[1].ID {
			t.Errorf("next_after = %v, want the last event %s", p.Meta.NextAfter, evs[1].ID)
		}

		// Each event is the very bytes a webhook carries.
		for i, e := range evs {
			var row events.Event
			if err := a.db.Gorm.Where("public_id = ?", e.ID).Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			body, err := a.app.Events.Body(row)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Data[i], body) {
				t.Errorf("event %d in the feed:\n%s\nwant the delivered body:\n%s", i, p.Data[i], body)
			}
		}
	})
}

func TestEventsFeedResumesFiltersAndPages(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		first := a.create(acme, "one.test")
		a.create(acme, "two.test")
		a.do(http.MethodDelete, "/api/licenses/"+first, "", acme...).wantStatus(http.StatusNoContent)
		a.dispatch()
		all := a.feed(acme, "").events(t)
		if len(all) != 3 {
			t.Fatalf("feed has %d events, want 3", len(all))
		}

		// after resumes past the event named.
		if got := eventTypes(a.feed(acme, "after="+all[0].ID).events(t)); strings.Join(got, ",") != "license.created,license.revoked" {
			t.Errorf("after the first: %v", got)
		}
		end := a.feed(acme, "after="+all[2].ID)
		if len(end.Data) != 0 || end.Meta.NextAfter == nil || *end.Meta.NextAfter != all[2].ID || end.Links.Next != nil {
			t.Errorf("after the last = %+v, want nothing, and next_after the after asked with", end)
		}

		// type: one, or a comma list.
		if got := a.feed(acme, "type=license.revoked").events(t); len(got) != 1 || got[0].ID != all[2].ID {
			t.Errorf("type=license.revoked: %v", eventTypes(got))
		}
		if got := a.feed(acme, "type=license.revoked,%20license.created").events(t); len(got) != 3 {
			t.Errorf("type=license.revoked,license.created: %v", eventTypes(got))
		}
		if got := a.feed(acme, "type=license.suspended").events(t); len(got) != 0 {
			t.Errorf("type=license.suspended: %v", eventTypes(got))
		}

		// per_page pages, and links.next follows with the filter and the size.
		p := a.feed(acme, "type=license.created&per_page=1")
		if len(p.Data) != 1 || !p.Meta.HasMore || p.Meta.PerPage != 1 || p.Links.Next == nil {
			t.Fatalf("per_page=1 = %+v, want one event and more", p)
		}
		want := testIssuer + "/api/events?type=license.created&per_page=1&after=" + all[0].ID
		if *p.Links.Next != want {
			t.Errorf("links.next = %s, want %s", *p.Links.Next, want)
		}
		next := a.feed(acme, strings.TrimPrefix(*p.Links.Next, testIssuer+"/api/events?"))
		if evs := next.events(t); len(evs) != 1 || evs[0].ID != all[1].ID || next.Meta.HasMore || next.Links.Next != nil {
			t.Errorf("the next page = %+v, want the second create and no more", next)
		}
	})
}

func TestEventsFeedIsTheCallersOwn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		a.create(acme, "acme.test")
		a.create(globex, "globex.test")
		a.dispatch()
		mine := a.feed(acme, "").events(t)
		theirs := a.feed(globex, "").events(t)
		if len(mine) != 1 || len(theirs) != 1 || mine[0].ID == theirs[0].ID {
			t.Fatalf("acme sees %v, globex %v: want one event each, their own", mine, theirs)
		}
		// Another's event is no place to resume from: 422 on after, as an unknown one.
		m := a.do(http.MethodGet, "/api/events?after="+theirs[0].ID, "", acme...).wantStatus(http.StatusUnprocessableEntity).json()
		wantFieldErrors(t, m, `{"after":["The selected after is invalid."]}`)
	})
}

func TestEventsFeedRefusesBadQueries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		a.create(acme, "acme.test")
		a.dispatch()
		cases := []struct{ query, errors string }{
			{"after=evt_01JDQ8Z7F0A2B4C6D8E0G2H4J6", `{"after":["The selected after is invalid."]}`},
			{"after=nope", `{"after":["The selected after is invalid."]}`},
			{"type=license.bogus", `{"type":["The selected type is invalid."]}`},
			{"type=license.created,", `{"type":["The selected type is invalid."]}`},
			{"type=license.*", `{"type":["The selected type is invalid."]}`},
			{"per_page=0", `{"per_page":["The per page field must be at least 1."]}`},
			{"per_page=101", `{"per_page":["The per page field must not be greater than 100."]}`},
			{"per_page=x&type=x&after=evt_01JDQ8Z7F0A2B4C6D8E0G2H4J6",
				`{"after":["The selected after is invalid."],"type":["The selected type is invalid."],"per_page":["The per page field must be an integer."]}`},
		}
		for _, tc := range cases {
			r := a.do(http.MethodGet, "/api/events?"+tc.query, "", acme...).wantStatus(http.StatusUnprocessableEntity)
			wantFieldErrors(t, r.json(), tc.errors)
			if !bytes.Contains(r.Body.Bytes(), []byte(`"errors":`+tc.errors)) {
				t.Errorf("?%s: errors not in rule order: %s", tc.query, r.Body.String())
			}
		}
	})
}

func TestEventsFeedNeedsLicensesRead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.do(http.MethodGet, "/api/events", "", bearer(a.token("acme", auth.LicensesWrite, auth.WebhooksManage))...).
			wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/events", "").wantStatus(http.StatusUnauthorized)
		a.do(http.MethodGet, "/api/events", "", bearer(a.token("acme", auth.LicensesRead))...).wantStatus(http.StatusOK)
	})
}

// wantFieldErrors fails unless the body's errors are want (a JSON object).
func wantFieldErrors(t *testing.T, body map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(body["errors"])
	wb, _ := json.Marshal(w)
	if !bytes.Equal(got, wb) {
		t.Errorf("errors = %s, want %s", got, wb)
	}
}

// An endpoint's events carry its URL, which only webhooks:manage reads: a
// token with licenses:read alone reads the license events of the feed, and
// asking it for webhook_endpoint.disabled is a 403; with webhooks:manage
// too, the feed has them.
func TestEventsFeedShowsEndpointEventsToWebhooksManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		manage := a.hooks("acme")
		ep := a.endpoint(manage, `{"url":"http://127.0.0.1:9/hooks?token=secret-of-the-consumer"}`)
		a.do(http.MethodPost, "/api/licenses", acmeBody, manage...).wantStatus(http.StatusCreated)
		var consumerID string
		if err := db.Gorm.Raw("SELECT consumer_id FROM webhook_endpoints WHERE id = ?", ep["id"]).Scan(&consumerID).Error; err != nil {
			t.Fatal(err)
		}
		shown := a.do(http.MethodGet, "/api/webhook-endpoints/"+ep["id"].(string), "", manage...).wantStatus(http.StatusOK).licenseData()
		err := a.app.Events.Append(db.Gorm, events.Draft{ConsumerID: consumerID, Type: events.EndpointDisabled, SubjectID: ep["id"].(string),
			Sequence: 1, Data: map[string]any{"webhook_endpoint": shown}, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		a.dispatch()
		reader := bearer(a.token("acme", auth.LicensesRead))
		if got := eventTypes(a.feed(reader, "").events(t)); fmt.Sprint(got) != "[license.created]" {
			t.Errorf("licenses:read alone reads %v, want the license event only", got)
		}
		if got := eventTypes(a.feed(manage, "").events(t)); fmt.Sprint(got) != "[license.created webhook_endpoint.disabled]" {
			t.Errorf("webhooks:manage reads %v, want the endpoint's event too", got)
		}
		a.do(http.MethodGet, "/api/events?type=webhook_endpoint.disabled", "", reader...).wantError(http.StatusForbidden, "missing_ability")
		if body := a.do(http.MethodGet, "/api/events", "", reader...).Body.String(); strings.Contains(body, "secret-of-the-consumer") {
			t.Errorf("the feed shows the endpoint's URL to licenses:read: %s", body)
		}
	})
}
