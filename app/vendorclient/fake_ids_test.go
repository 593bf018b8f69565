package vendorclient_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorsim"
)

// A site id is never given twice, not even by a new fake (the next process)
// or a new simulator without a state file: a counter from 1 gave site_1
// again after a restart, and a webhook or drift check matching by that id
// reached another domain's license.
func TestSiteIDsAreUniqueAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	seen := map[string]string{}
	note := func(who, id string) {
		t.Helper()
		if !strings.HasPrefix(id, "site_") || len(id) < len("site_")+20 {
			t.Errorf("%s gave %q, want site_ and a long random part", who, id)
		}
		if first, dup := seen[id]; dup {
			t.Errorf("%s gave %s again (first by %s)", who, id, first)
		}
		seen[id] = who
	}
	for run := range 3 { // three processes' fakes
		f := vendorclient.NewFake()
		for _, d := range []string{"a.test", "b.test"} {
			site, err := f.CreateSite(ctx, "Acme", d)
			if err != nil {
				t.Fatal(err)
			}
			note("fake "+string(rune('1'+run)), site.ID)
		}
	}
	for run := range 3 { // three simulators, no state file
		sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"a.test", "b.test"} {
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, httptest.NewRequest("POST", "/sites", strings.NewReader(`{"name":"Acme","domain":"`+d+`"}`)))
			if rec.Code != 201 {
				t.Fatalf("create = %d %s", rec.Code, rec.Body)
			}
		}
		for _, s := range sim.Sites() {
			note("simulator "+string(rune('1'+run)), s.ID)
		}
		sim.Close()
	}
}
