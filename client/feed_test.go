package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// feedAPI serves 5 events, two a page, by after, as GET /api/events does,
// and records each query.
func feedAPI(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var queries []string
	ids := []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path != "/api/events" || r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "not the feed", http.StatusNotFound)
			return
		}
		from := 0
		if a := r.URL.Query().Get("after"); a != "" {
			from = -1
			for i, id := range ids {
				if id == a {
					from = i + 1
				}
			}
			if from < 0 {
				w.WriteHeader(http.StatusUnprocessableEntity)
				fmt.Fprint(w, `{"message":"The selected after is invalid.","errors":{"after":["The selected after is invalid."]}}`)
				return
			}
		}
		to := min(from+2, len(ids))
		var data []string
		for i := from; i < to; i++ {
			data = append(data, fmt.Sprintf(`{"id":%q,"type":"license.created","created_at":"2026-11-30T10:00:00.000000Z","data":{"license":{"id":"L%d"}},"sequence":1}`, ids[i], i))
		}
		next := `null`
		if to > 0 {
			next = fmt.Sprintf("%q", ids[to-1])
		} else if a := r.URL.Query().Get("after"); a != "" {
			next = fmt.Sprintf("%q", a)
		}
		fmt.Fprintf(w, `{"data":[%s],"links":{"next":null},"meta":{"per_page":2,"has_more":%t,"next_after":%s}}`,
			strings.Join(data, ","), to < len(ids), next)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), queries...) }
}

// The iterator reads every page, each from the previous page's next_after,
// and ends once the feed has no more.
func TestEventsIteratesPages(t *testing.T) {
	srv, queries := feedAPI(t)
	c := New(srv.URL, testToken)
	var got []string
	for ev, err := range c.Events(context.Background(), EventsQuery{Types: []string{EventLicenseCreated}, PerPage: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		lic, err := ev.License()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.ID+"/"+lic.ID)
	}
	if want := "evt_1/L0 evt_2/L1 evt_3/L2 evt_4/L3 evt_5/L4"; strings.Join(got, " ") != want {
		t.Errorf("events = %v, want %s", got, want)
	}
	want := []string{"per_page=2&type=license.created", "after=evt_2&per_page=2&type=license.created", "after=evt_4&per_page=2&type=license.created"}
	if q := queries(); strings.Join(q, " | ") != strings.Join(want, " | ") {
		t.Errorf("queries = %q, want %q", q, want)
	}

	// Resuming from the last event read: the rest only; from the end: none.
	got = nil
	for ev, err := range c.Events(context.Background(), EventsQuery{After: "evt_3"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.ID)
	}
	if strings.Join(got, " ") != "evt_4 evt_5" {
		t.Errorf("after evt_3: %v, want evt_4 evt_5", got)
	}
	p, err := c.ListEvents(context.Background(), EventsQuery{After: "evt_5"})
	if err != nil || len(p.Events) != 0 || p.HasMore || p.NextAfter != "evt_5" {
		t.Errorf("after the last: %+v, %v; want an empty page resuming from evt_5", p, err)
	}
}

// Breaking out of the loop stops the reading; an error is yielded once and
// ends the iteration.
func TestEventsStopsAndErrors(t *testing.T) {
	srv, queries := feedAPI(t)
	c := New(srv.URL, testToken)
	for range c.Events(context.Background(), EventsQuery{}) {
		break
	}
	if n := len(queries()); n != 1 {
		t.Errorf("pages read after a break on the first event: %d, want 1", n)
	}
	var errs, evs int
	for _, err := range c.Events(context.Background(), EventsQuery{After: "evt_pruned"}) {
		if err == nil {
			evs++
			continue
		}
		errs++
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 422 || len(apiErr.Fields["after"]) != 1 {
			t.Errorf("err = %v, want the 422 on after", err)
		}
	}
	if errs != 1 || evs != 0 {
		t.Errorf("events %d, errors %d; want the one error only", evs, errs)
	}
}

// WaitOperation reads the operation a 202 named until it is completed,
// waiting the 202's Retry-After between reads, never really.
func TestWaitOperation(t *testing.T) {
	op := func(status, result string) reply {
		return reply{status: 200, body: `{"data":{"id":"01JOP","operation":"licenses.store","status":"` + status + `","attempts":2,` +
			`"created_at":"2026-11-30T09:55:54.000000Z","updated_at":"2026-11-30T09:57:10.000000Z"` + result + `}}`}
	}
	pending := reply{status: 202, code: CodeOperationPending, header: map[string]string{"Retry-After": "7", "Location": "/api/operations/01JOP"},
		body: `{"message":"pending","code":"operation_pending","operation":{"id":"01JOP","status":"pending","retry_after":7}}`}

	f := newFakeAPI(t, pending, op("pending", ""), op("processing", ""), op("completed", `,"result":{"status":201,"location":"/api/licenses/01JL"}`))
	c, rec := newTestClient(t, f, WithMaxAttempts(1))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.OperationID != "01JOP" || apiErr.RetryAfter != 7*time.Second {
		t.Fatalf("err = %v, want a 202 naming operation 01JOP with Retry-After 7", err)
	}
	got, err := c.WaitOperation(context.Background(), apiErr.OperationID, apiErr.RetryAfter)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != OperationCompleted || got.Result == nil || got.Result.Status != 201 || got.Result.Location != "/api/licenses/01JL" {
		t.Errorf("operation = %+v, want completed with the 201's location", got)
	}
	if !slices.Equal(rec.waits, []time.Duration{7 * time.Second, 7 * time.Second}) {
		t.Errorf("waits = %v, want the 202's Retry-After twice", rec.waits)
	}
	reqs := f.requests()
	if len(reqs) != 4 || reqs[1].path != "/api/operations/01JOP" || reqs[3].method != http.MethodGet {
		t.Errorf("requests = %+v, want the create then 3 reads of the operation", reqs)
	}

	t.Run("failed is settled", func(t *testing.T) {
		f := newFakeAPI(t, op("failed", ""))
		c, _ := newTestClient(t, f)
		if got, err := c.WaitOperation(context.Background(), "01JOP", 0); err != nil || got.Status != OperationFailed {
			t.Errorf("WaitOperation = %+v, %v; want failed", got, err)
		}
	})
	t.Run("the deadline stops it", func(t *testing.T) {
		f := newFakeAPI(t, op("pending", ""))
		c, rec := newTestClient(t, f)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		got, err := c.WaitOperation(ctx, "01JOP", 0) // DefaultOperationPoll, 5 s, would pass the deadline
		if !errors.Is(err, context.DeadlineExceeded) || got.Status != OperationPending || len(rec.waits) != 0 {
			t.Errorf("WaitOperation = %+v, %v after waits %v; want pending and the deadline at once", got, err, rec.waits)
		}
	})
}

// A delete whose answer was lost, retried, gets 404: the lost attempt
// deleted it, and the call succeeds; a 404 on a first attempt is an error.
func TestDeleteWebhookEndpointAfterLostAnswer(t *testing.T) {
	f := newFakeAPI(t, reply{reset: true}, reply{status: 404})
	c, _ := newTestClient(t, f)
	if err := c.DeleteWebhookEndpoint(context.Background(), "01JEP"); err != nil {
		t.Errorf("delete after a lost answer then 404: %v, want success", err)
	}
	f = newFakeAPI(t, reply{status: 404})
	c, _ = newTestClient(t, f)
	if err := c.DeleteWebhookEndpoint(context.Background(), "01JEP"); err == nil {
		t.Error("delete of an unknown endpoint: success, want the 404")
	}
}

// Creating an endpoint is not keyed: a connection dropped after the
// request was written is not repeated (a second endpoint), while a refused
// one (nothing sent) is.
func TestCreateWebhookEndpointRetriesOnlyWhatWasNotSent(t *testing.T) {
	f := newFakeAPI(t, reply{reset: true}, reply{status: 201, body: `{"data":{"id":"01JEP"}}`})
	c, _ := newTestClient(t, f)
	if _, err := c.CreateWebhookEndpoint(context.Background(), WebhookEndpointInput{URL: "https://shop.example/hooks"}); err == nil || errors.Is(err, ErrNotSent) {
		t.Errorf("create whose answer was lost: %v, want the network error, not retried", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}

	a := newRestartingAPI(t, 1)
	c = New("http://"+a.addr, testToken, WithSleep(a.sleep), WithJitter(noJitter))
	if _, err := c.CreateWebhookEndpoint(context.Background(), WebhookEndpointInput{URL: "https://shop.example/hooks"}); err != nil {
		t.Errorf("create through a restart (refused, nothing sent): %v", err)
	}
	if len(a.keys) != 1 || a.keys[0] != "" {
		t.Errorf("requests that reached the server: %q, want 1, without a key", a.keys)
	}
}
