package vendorproto

// The types of the vendor's events: what it did to a site on its own side.
const (
	EventSiteSuspended   = "site.suspended"
	EventSiteReactivated = "site.reactivated"
	EventSiteDeleted     = "site.deleted"
	EventSiteKeyRotated  = "site.key_rotated"
)

// Event is the body of a webhook: {"id","type","created","data":{"site":…}}.
// The id is unique per event and the same on every redelivery.
type Event struct {
	ID      string    `json:"id"`      // "evt_…"
	Type    string    `json:"type"`    // EventSiteSuspended, …; a receiver ignores a type it does not know
	Created int64     `json:"created"` // when the vendor made the change, in Unix seconds
	Data    EventData `json:"data"`
}

// EventData is an Event's "data": the site after the change (as it was,
// for a deletion). A nil Site after decoding is an event without one.
type EventData struct {
	Site *Site `json:"site"`
}
