package vendorclient

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
)

// Drop modes: how the simulator loses the answer to a write it committed.
const (
	DropHang  = "hang"  // hold the request until the client gives up
	DropClose = "close" // close the connection without a word
)

// SimOptions are the simulator's faults; the zero value is a vendor that
// accepts any token and never fails.
type SimOptions struct {
	Token       string        // when set, requests must carry "Bearer <Token>" or get 401
	Latency     time.Duration // added to every request
	Burst429    int           // the first N requests (past the token check) answer 429
	RetryAfter  time.Duration // Retry-After of those 429s, sent in whole seconds rounded up; 0 sends none
	Rate5xx     float64       // share of requests, 0..1, answering 500 before doing anything: every 1/Rate5xx-th, not random
	DropCreates int           // the first N creates are committed, then their answer is lost
	DropDeletes int           // the first N deletes of a site it holds are committed, then their answer is lost
	DropMode    string        // DropHang (the default) or DropClose
	Store       *Fake         // the sites; nil for a new, empty store
	Log         *slog.Logger  // a line per request; nil for none
}

// Simulator serves the vendor protocol from memory, with the faults of its
// SimOptions. It counts the calls it gets, for tests and demos.
type Simulator struct {
	opts  SimOptions
	store *Fake
	mux   *http.ServeMux

	mu      sync.Mutex
	calls   map[string]int // by route: "GET /sites", "POST /sites", "DELETE /sites/{id}"
	served  int            // requests past the token check, for the 429 burst
	owed5xx float64        // accumulates Rate5xx; a 500 is due at each whole one
	dropped int
	// droppedDeletes counts the deletes whose answer was lost, as dropped
	// counts the creates.
	droppedDeletes int
}

var _ http.Handler = (*Simulator)(nil)

// NewSimulator builds a simulator, refusing options that make no sense.
func NewSimulator(opts SimOptions) (*Simulator, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.DropMode == "" {
		opts.DropMode = DropHang
	}
	if opts.Store == nil {
		opts.Store = NewFake()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Simulator{opts: opts, store: opts.Store, mux: http.NewServeMux(), calls: map[string]int{}}
	s.route("GET /sites", s.list)
	s.route("POST /sites", s.create)
	s.route("DELETE /sites/{id}", s.delete)
	return s, nil
}

func (o SimOptions) validate() error {
	switch {
	case o.Latency < 0 || o.RetryAfter < 0:
		return errors.New("latency and retry-after cannot be negative")
	case o.Burst429 < 0 || o.DropCreates < 0 || o.DropDeletes < 0:
		return errors.New("429-burst, drop-creates and drop-deletes cannot be negative")
	case o.Rate5xx < 0 || o.Rate5xx > 1:
		return fmt.Errorf("5xx-rate %v is not between 0 and 1", o.Rate5xx)
	case o.DropMode != "" && o.DropMode != DropHang && o.DropMode != DropClose:
		return fmt.Errorf("drop-mode %q is not %s or %s", o.DropMode, DropHang, DropClose)
	}
	return nil
}

// ServeHTTP answers one vendor request.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Calls returns how many requests each route got, faults included.
func (s *Simulator) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Sites returns the sites the simulator holds, oldest first.
func (s *Simulator) Sites() []licenses.Site { return s.store.Sites() }

// route serves pattern with h, after the latency, the token check and the
// request-level faults.
func (s *Simulator) route(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.count(pattern)
		body, err := readAll(r)
		if err != nil {
			return // the client went away mid-request
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !pause(r.Context(), s.opts.Latency) {
			return // the client gave up
		}
		if !s.authorized(r) {
			s.reply(w, r, http.StatusUnauthorized, message("Unauthenticated."), "bad token")
			return
		}
		switch s.fault() {
		case http.StatusTooManyRequests:
			if s.opts.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
			}
			s.reply(w, r, http.StatusTooManyRequests, message("Too Many Attempts."), "429 burst")
		case http.StatusInternalServerError:
			s.reply(w, r, http.StatusInternalServerError, message("Server Error"), "5xx rate")
		default:
			h(w, r)
		}
	})
}

func (s *Simulator) count(pattern string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[pattern]++
}

func (s *Simulator) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+s.opts.Token)) == 1
}

// fault decides whether this request fails before doing anything: the 429
// burst comes first, then the share of 500s. It returns 0 for no fault.
func (s *Simulator) fault() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served++
	if s.served <= s.opts.Burst429 {
		return http.StatusTooManyRequests
	}
	s.owed5xx += s.opts.Rate5xx
	if s.owed5xx >= 1-1e-9 {
		s.owed5xx--
		return http.StatusInternalServerError
	}
	return 0
}

// pause waits d; false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	return sleep(ctx, d) == nil
}

func message(m string) map[string]any { return map[string]any{"message": m} }

// reply writes a JSON answer and logs it, without the body: it may hold keys.
func (s *Simulator) reply(w http.ResponseWriter, r *http.Request, status int, body any, fault string) {
	s.opts.Log.Info("vendor-sim", "method", r.Method, "path", r.URL.Path, "status", status, "fault", fault)
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client went away; nothing to do
}

// readAll reads a request body whole. Done first, it also lets the server
// notice a client that hangs up during the latency or a dropped answer: the
// server watches the connection only once the body is read.
func readAll(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}
