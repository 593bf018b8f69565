package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A create whose vendor call a revoke of the domain overtakes is superseded
// while it runs: whatever its vendor call then met (a refusal of a site the
// revoke was deleting, another refusal, an unknown outcome), its answer is
// 409 intent_superseded, the very answer a retry with its key gets, and
// nothing is logged as an error: it is an expected outcome.
func TestCreateSupersededWhileItRunsAnswersIntentSuperseded(t *testing.T) {
	cases := []struct {
		name  string
		reply reply
	}{
		{"refused for the domain", reply{status: http.StatusUnprocessableEntity,
			body: `{"message":"The domain already has a site.","errors":{"domain":["taken"]}}`}},
		{"refused for the name", reply{status: http.StatusUnprocessableEntity,
			body: `{"message":"The given data was invalid.","errors":{"name":["invalid"]}}`}},
		{"unknown outcome", reply{status: http.StatusInternalServerError, body: `{}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				a := newApp(t, db)
				acme := a.consumer("acme")
				// k-1's create reaches the vendor and waits there.
				rep := tc.reply
				rep.hold, rep.entered = make(chan struct{}), make(chan struct{})
				a.vendor.script("POST", rep)
				var first *response
				var wg sync.WaitGroup
				wg.Go(func() { first = a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "k-1")...) })
				<-rep.entered
				id := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "k-2")...).wantStatus(http.StatusCreated).licenseData()["id"].(string)
				a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
				close(rep.hold)
				wg.Wait()

				first.wantError(http.StatusConflict, "intent_superseded")
				a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "k-1")...).wantError(http.StatusConflict, "intent_superseded")
				if rec := a.record("k-1"); rec == nil || rec.Status != "superseded" {
					t.Errorf("k-1: %+v, want it superseded", rec)
				}
				if got := a.activeLicenses(); len(got) != 0 || a.vendor.siteCount() != 0 {
					t.Errorf("active licenses %v, %d vendor sites: want neither for a revoked domain", got, a.vendor.siteCount())
				}
				if logs := a.logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
					t.Errorf("an expected supersession was logged as an error:\n%s", logs)
				}
			})
		})
	}
}

// Creates and revokes of one domain racing on real goroutines: every create
// is answered with one of the answers api.md documents for it, and never
// vendor_rejected: the vendor refuses only a site of the domain that another
// create made (adopted) or that a revoke is deleting (the create is
// superseded, or asks again).
func TestRacingCreatesAndRevokesAnswerAsDocumented(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		const workers, rounds = 6, 10
		var mu sync.Mutex
		answers := map[string]int{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					r := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, fmt.Sprintf("w%d-%d", w, i))...)
					got := fmt.Sprint(r.Code)
					if r.Code >= 400 {
						code, _ := r.json()["code"].(string)
						got += " " + code
					}
					mu.Lock()
					answers[got]++
					mu.Unlock()
					if r.Code == http.StatusCreated || r.Code == http.StatusOK {
						id, _ := r.licenseData()["id"].(string)
						a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...)
					}
				}
			})
		}
		wg.Wait()
		documented := map[string]bool{"201": true, "200": true, "202": true, "409 intent_superseded": true}
		for got, n := range answers {
			if !documented[got] {
				t.Errorf("%d creates answered %q, not a documented answer to this race (all: %v)", n, got, answers)
			}
		}
		if logs := a.logs.String(); strings.Contains(logs, "settle failed") {
			t.Errorf("a superseded create was logged as a failed settle (answers: %v): %s", answers, settleLines(logs))
		}
		t.Logf("answers: %v", answers)
	})
}

// settleLines are the log lines of failed settles.
func settleLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "settle failed") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
