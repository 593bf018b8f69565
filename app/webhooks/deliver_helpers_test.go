package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// hit is one request a receiver got.
type hit struct {
	header http.Header
	body   []byte
	status int // what it answered
}

// eventID is the id in the body of the hit.
func (h hit) eventID() string {
	var e struct{ ID string }
	_ = json.Unmarshal(h.body, &e)
	return e.ID
}

// receiver is a webhook endpoint that counts what it gets and answers as
// told: answer says the status of the n-th request (from 0); nil answers
// 200 to every one.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int, w http.ResponseWriter) int
}

func newReceiver(t testing.TB, answer func(n int, w http.ResponseWriter) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		rc.mu.Lock()
		n := len(rc.hits)
		status := http.StatusOK
		if rc.answer != nil {
			status = rc.answer(n, w)
		}
		rc.hits = append(rc.hits, hit{header: req.Header.Clone(), body: body, status: status})
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// failing answers status to the first n requests, then 200.
func failing(status, n int) func(int, http.ResponseWriter) int {
	return func(i int, _ http.ResponseWriter) int {
		if i < n {
			return status
		}
		return http.StatusOK
	}
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks" }

func (rc *receiver) port() string {
	u, _ := url.Parse(rc.srv.URL)
	return u.Port()
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.hits)
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// delivered is how many times each event was answered 2xx.
func (rc *receiver) delivered() map[string]int {
	out := map[string]int{}
	for _, h := range rc.got() {
		if h.status/100 == 2 {
			out[h.eventID()]++
		}
	}
	return out
}

// tally counts the outcomes a Service observes.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (tl *tally) observe(outcome string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.m == nil {
		tl.m = map[string]int{}
	}
	tl.m[outcome]++
}

func (tl *tally) of(outcome string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.m[outcome]
}

// deliver runs the worker until nothing is due; it returns how many
// deliveries it claimed.
func (r *rig) deliver() int {
	r.t.Helper()
	return deliverWith(r.t, r.hooks)
}

func deliverWith(t testing.TB, s *Service) int {
	t.Helper()
	total := 0
	for {
		n, err := s.DeliverDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
}

// deliveries are the endpoint's deliveries, oldest first.
func (r *rig) deliveries(endpointID string) []Delivery {
	r.t.Helper()
	var out []Delivery
	must(r.t, r.db.Gorm.Where("endpoint_id = ?", endpointID).Order("event_id").Find(&out).Error)
	return out
}

// attempts are the delivery's attempts, oldest first.
func (r *rig) attempts(deliveryID string) []Attempt {
	r.t.Helper()
	var out []Attempt
	must(r.t, r.db.Gorm.Where("delivery_id = ?", deliveryID).Order("id").Find(&out).Error)
	return out
}

// reload reads the endpoint again.
func (r *rig) reload(e Endpoint) Endpoint {
	r.t.Helper()
	got, err := r.hooks.GetEndpoint(context.Background(), "", e.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}
