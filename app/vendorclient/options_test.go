package vendorclient_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/internal/testkit"
)

// observed records what an observer is told.
type observed struct {
	mu      sync.Mutex
	answers []string // "call status"
	retries []string // calls
}

func (o *observed) observe(call string, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answers = append(o.answers, fmt.Sprintf("%s %d", call, status))
}

func (o *observed) onRetry(call string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retries = append(o.retries, call)
}

func (o *observed) check(t *testing.T, answers, retries []string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !reflect.DeepEqual(o.answers, answers) {
		t.Errorf("observed answers %q, want %q", o.answers, answers)
	}
	if !reflect.DeepEqual(o.retries, retries) {
		t.Errorf("observed retries %q, want %q", o.retries, retries)
	}
}

// TestObserverSeesEveryAnswerAndRetry: WithObserver is told of each answer,
// 429s included, and of each retry; a call that got no answer is status 0.
func TestObserverSeesEveryAnswerAndRetry(t *testing.T) {
	s := stub(t, respond(http.StatusTooManyRequests, "", "Retry-After", "1"), created201)
	var o observed
	d, _, _ := newDriver(t, testConfig(s.URL), vendorclient.WithObserver(o.observe, o.onRetry))
	if _, err := d.CreateSite(context.Background(), "Acme", "acme.test"); err != nil {
		t.Fatal(err)
	}
	o.check(t, []string{"create 429", "create 201"}, []string{"create"})

	refused := "http://" + testkit.FreeAddr(t)
	var none observed
	d, _, _ = newDriver(t, testConfig(refused), vendorclient.WithObserver(none.observe, none.onRetry))
	_ = callVendor(context.Background(), d, "list")
	none.check(t, []string{"list 0"}, nil)
}

// TestNilOptionsKeepTheDefaults: a nil Option, or nil hooks, leave the
// defaults in place: the driver works, reporting to no one.
func TestNilOptionsKeepTheDefaults(t *testing.T) {
	s := stub(t, respond(http.StatusTooManyRequests, "", "Retry-After", "0"), created201)
	d, err := vendorclient.NewHTTP(testConfig(s.URL), nil, nil,
		vendorclient.WithObserver(nil, nil), vendorclient.WithSleep(nil), vendorclient.WithClock(nil), vendorclient.WithJitter(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateSite(context.Background(), "Acme", "acme.test"); err != nil {
		t.Fatal(err)
	}
	s.assertSentCount(t, 2)
}
