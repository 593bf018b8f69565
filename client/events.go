package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
)

// EventsQuery selects what Events and ListEvents read from the feed
// (GET /api/events); every field is optional.
type EventsQuery struct {
	// After is the id of the last event already read: the feed starts after
	// it. Empty: from the oldest event kept.
	After string
	// Types keeps only events of these types (EventLicenseRevoked, …).
	Types []string
	// PerPage is the page size, 1–100; ≤ 0 takes the API's 50.
	PerPage int
}

// EventsPage is one page of the feed, oldest event first.
type EventsPage struct {
	Events []Event
	// HasMore: more events are there now; ask again from NextAfter.
	HasMore bool
	// NextAfter is where to read on from: the page's last event, or the
	// After sent when the page is empty.
	NextAfter string
}

// ListEvents reads one page of the consumer's events feed. A GET: retried
// by the policy, network errors included.
func (c *Client) ListEvents(ctx context.Context, q EventsQuery) (EventsPage, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if len(q.Types) > 0 {
		v.Set("type", strings.Join(q.Types, ","))
	}
	resp, err := c.do(ctx, request{op: "list events", method: http.MethodGet, path: pagePath("/api/events", v, 0, q.PerPage),
		success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return EventsPage{}, err
	}
	var b struct {
		Data []Event `json:"data"`
		Meta struct {
			HasMore   bool    `json:"has_more"`
			NextAfter *string `json:"next_after"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(resp.body, &b); err != nil {
		return EventsPage{}, fmt.Errorf("list events: decode the response: %w", err)
	}
	p := EventsPage{Events: b.Data, HasMore: b.Meta.HasMore}
	if b.Meta.NextAfter != nil {
		p.NextAfter = *b.Meta.NextAfter
	}
	return p, nil
}

// Events yields the feed's events from q.After in order, page after page,
// until the events there are now are read. An error is yielded once, last.
// To resume later, pass the ID of the last event handled as q.After:
//
//	for ev, err := range c.Events(ctx, client.EventsQuery{After: last}) {
//		if err != nil {
//			return err // a 422 on after: the event was pruned; read again without it
//		}
//		handle(ev)
//		last = ev.ID
//	}
func (c *Client) Events(ctx context.Context, q EventsQuery) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			p, err := c.ListEvents(ctx, q)
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, ev := range p.Events {
				if !yield(ev, nil) {
					return
				}
			}
			if !p.HasMore || len(p.Events) == 0 || p.NextAfter == "" || p.NextAfter == q.After {
				return
			}
			q.After = p.NextAfter
		}
	}
}
