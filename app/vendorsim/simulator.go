package vendorsim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/internal/wait"
)

// Drop modes: how the simulator loses the answer to a request.
const (
	DropHang           = "hang"             // hold the request until the client gives up
	DropClose          = "close"            // close the connection without a word
	Drop5xxAfterCommit = "5xx-after-commit" // do the work, then answer 500
)

// SimOptions configure a simulator; the zero value is a vendor that
// accepts any token, never fails and keeps its sites in memory.
type SimOptions struct {
	SimFaults              // the faults, replaceable while it runs (POST /_sim/faults)
	Token     string       // when set, requests must carry "Bearer <Token>" or get 401
	Seed      uint64       // seeds the random faults: one seed and one request order, one fault sequence
	StateFile string       // when set, the sites are kept in this JSON file across restarts
	Log       *slog.Logger // a line per request; nil for none
	Webhook   SimWebhook   // the events of /_sim/sites/{id}/…; no URL sends none
}

// Simulator serves the vendor protocol from memory, with the faults of its
// SimOptions, and the /_sim/ routes that report and steer it.
type Simulator struct {
	opts  SimOptions // Token, StateFile, Log; the faults live in faults
	store *store
	mux   *http.ServeMux
	save  sync.Mutex // serializes writes of the state file
	hooks *webhooks  // builds, queues and delivers the events; Close stops it

	mu             sync.Mutex
	faults         SimFaults
	seed           uint64
	rng            *rand.Rand
	calls          map[string]int // requests by route, counted as they arrive
	stats          simCounters
	served         int // requests past the token check, for the 429 burst
	droppedCreates int // creates whose answer was lost to --drop-creates
	droppedDeletes int // deletes whose answer was lost to --drop-deletes
}

var _ http.Handler = (*Simulator)(nil)

// NewSimulator builds a simulator, refusing options that make no sense and
// a state file it cannot read. With a webhook URL it starts delivering
// events at once, until Close.
func NewSimulator(opts SimOptions) (*Simulator, error) {
	faults, err := opts.SimFaults.normalized()
	if err != nil {
		return nil, err
	}
	hooks, err := opts.Webhook.normalized()
	if err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	st := newStore()
	if opts.StateFile != "" {
		if err := loadState(opts.StateFile, st); err != nil {
			return nil, err
		}
	}
	s := &Simulator{opts: opts, store: st, mux: http.NewServeMux(), faults: faults, calls: map[string]int{}}
	s.reseed(opts.Seed)
	s.hooks = newWebhooks(hooks, opts.Seed, opts.Log)
	serve := s.handlers()
	for _, c := range vendorproto.Calls {
		h, ok := serve[c.Name]
		if !ok {
			return nil, fmt.Errorf("vendor-sim: no handler for the vendor call %s", c.Route())
		}
		s.route(c.Route(), h)
	}
	s.adminRoutes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Calls returns how many requests each vendor route got, faults included,
// counted as they arrive.
func (s *Simulator) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Sites returns the sites the simulator holds, oldest first.
func (s *Simulator) Sites() []vendorproto.Site { return s.store.list("") }

// simCall is one vendor request on its way through the simulator: what its log
// line names, and the fault due once the route has done its work.
type simCall struct {
	w      http.ResponseWriter
	r      *http.Request
	route  string
	body   []byte
	domain string    // the domain it is about, when known
	site   string    // the site id it is about, when known
	faults SimFaults // in force when it arrived
	after  fault     // the fault to strike after the route's work (fault5xx, faultDrop), or none
	why    string    // what drew the fault, for the log
}

// route serves pattern with h, after the latency, the token check and the
// faults that strike before the work.
func (s *Simulator) route(pattern string, h func(*simCall)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c := &simCall{w: w, r: r, route: pattern}
		body, err := readAll(r)
		if err != nil {
			s.arrive(pattern)
			s.canceled(c)
			return // the client went away mid-request
		}
		c.body = body
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.identify(c)
		faults, dice := s.arrive(pattern)
		c.faults = faults
		if !pause(r.Context(), faults.Latency+time.Duration(dice.jitter*float64(faults.Jitter))) {
			s.canceled(c)
			return // the client gave up
		}
		if !s.authorized(r) {
			s.reply(c, http.StatusUnauthorized, message("Unauthenticated."), "bad token")
			return
		}
		before, why := s.strike(c, dice)
		switch before {
		case fault429:
			if faults.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((faults.RetryAfter+time.Second-1)/time.Second)))
			}
			s.reply(c, http.StatusTooManyRequests, message("Too Many Attempts."), why)
		case fault5xx:
			s.reply(c, http.StatusInternalServerError, message("Server Error"), "nothing done, answered 500: "+why)
		case faultDrop:
			s.drop(c, "nothing done")
		default:
			h(c)
		}
	})
}

// arrive counts a request to route and draws its dice, under the faults in
// force: one draw per request, so a seed and a request order give one
// sequence of faults.
func (s *Simulator) arrive(route string) (SimFaults, dice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[route]++
	return s.faults, s.roll()
}

// identify notes the domain and the site a request is about, for its log.
func (s *Simulator) identify(c *simCall) {
	if c.site = c.r.PathValue("id"); c.site != "" { // a call about one site
		if rec, ok := s.store.byID(c.site); ok {
			c.domain = rec.site.Domain
		}
		return
	}
	switch c.route {
	case vendorproto.ListSites.Route():
		c.domain = c.r.URL.Query().Get("domain")
	case vendorproto.CreateSite.Route():
		var in vendorproto.NewSite
		if json.Unmarshal(c.body, &in) == nil {
			c.domain = in.Domain
		}
	}
	if rec, ok := s.store.find(c.domain); ok && c.domain != "" {
		c.site = rec.site.ID
	}
}

func (s *Simulator) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+s.opts.Token)) == 1
}

func pause(ctx context.Context, d time.Duration) bool {
	return d <= 0 || wait.Sleep(ctx, d) == nil
}

func message(m string) vendorproto.ErrorBody { return vendorproto.ErrorBody{Message: m} }

// reply writes a JSON answer, counts it and logs it, without the body: it
// may hold keys.
func (s *Simulator) reply(c *simCall, status int, body any, fault string) {
	s.logCall(c, status, fault)
	s.tally(c.route, strconv.Itoa(status))
	writeJSON(c.w, status, body)
}

func (s *Simulator) canceled(c *simCall) {
	s.logCall(c, 0, "client gave up")
	s.tally(c.route, statusCanceled)
}

// logCall never logs a header or a body: the token and license keys stay out
// of logs.
func (s *Simulator) logCall(c *simCall, status int, fault string) {
	attrs := []any{"method", c.r.Method, "path", c.r.URL.Path}
	if c.domain != "" {
		attrs = append(attrs, "domain", c.domain)
	}
	if c.site != "" {
		attrs = append(attrs, "site", c.site)
	}
	attrs = append(attrs, "status", status, "fault", fault)
	s.opts.Log.Info("vendor-sim", attrs...)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client went away; nothing to do
}

const maxBody = 1 << 20

// readAll comes first: the server watches the connection for a client that
// hangs up (during the latency or a dropped answer) only once the body is read.
func readAll(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}
