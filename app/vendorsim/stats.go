package vendorsim

import (
	"maps"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// Statuses the stats count besides HTTP codes.
const (
	statusDropped  = "dropped"  // the answer was lost: held until the client gave up, or the connection closed
	statusCanceled = "canceled" // the client gave up before any answer (in the latency)
)

// SimStats is what the simulator has seen since it started or was last
// reset: GET /_sim/stats.
type SimStats struct {
	// Calls counts the answers of each vendor call by its route ("GET
	// /sites", "POST /sites", …: vendorproto.Call's Route) and status:
	// "200", "201", "429", …, "dropped" or "canceled". A request still in
	// its latency is not there yet.
	Calls             map[string]map[string]int `json:"calls"`
	CreatesCommitted  int                       `json:"creates_committed"`  // sites created, answered or not
	DuplicatesRefused int                       `json:"duplicates_refused"` // creates refused 422: the domain had a site
	DeletesCommitted  int                       `json:"deletes_committed"`  // sites deleted, answered or not
	Sites             int                       `json:"sites"`              // sites held now
	Dropped           int                       `json:"dropped"`            // answers lost (hang, close): the "dropped" of Calls
	Webhooks          WebhookStats              `json:"webhooks"`           // the webhook deliveries
}

// simCounters are the stats kept as they happen; s.mu guards them.
type simCounters struct {
	byStatus                     map[string]map[string]int
	creates, duplicates, deletes int
}

func (s *Simulator) tally(route, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.byStatus == nil {
		s.stats.byStatus = map[string]map[string]int{}
	}
	if s.stats.byStatus[route] == nil {
		s.stats.byStatus[route] = map[string]int{}
	}
	s.stats.byStatus[route][status]++
}

func (s *Simulator) count(n *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
}

// committed counts a committed create or delete and saves the sites.
func (s *Simulator) committed(n *int) {
	s.count(n)
	s.persist()
}

// Stats returns the SimStats.
func (s *Simulator) Stats() SimStats {
	sites := len(s.store.list(""))
	hooks := s.hooks.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SimStats{Calls: map[string]map[string]int{}, CreatesCommitted: s.stats.creates,
		DuplicatesRefused: s.stats.duplicates, DeletesCommitted: s.stats.deletes, Sites: sites, Webhooks: hooks}
	for _, c := range vendorproto.Calls {
		route := c.Route()
		st.Calls[route] = map[string]int{}
		maps.Copy(st.Calls[route], s.stats.byStatus[route])
		st.Dropped += st.Calls[route][statusDropped]
	}
	return st
}
