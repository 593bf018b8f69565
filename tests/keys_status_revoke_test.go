package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A revoke stores no request body (its license id is its key): keys status
// does not count that empty body as plaintext written before encryption at
// rest, so after creates and revokes it reports none, and keys rotate has
// nothing to seal in it.
func TestKeysStatusDoesNotCountARevokesEmptyBodyAsPlaintext(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for i := range 3 {
			id := a.create(acme, fmt.Sprintf("d%d.test", i))
			a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		}
		var empty int64
		if err := a.db.Gorm.Raw("SELECT COUNT(*) FROM idempotency_keys WHERE operation = 'licenses.destroy' AND request_body IS NOT NULL AND LENGTH(request_body) = 0").Scan(&empty).Error; err != nil {
			t.Fatal(err)
		}
		if empty != 3 {
			t.Fatalf("%d revokes stored an empty request body, want 3: the test no longer tests what it says", empty)
		}
		plaintext := func() map[string]int {
			var st struct {
				Columns []struct {
					Column    string `json:"column"`
					Plaintext int    `json:"plaintext"`
				} `json:"columns"`
			}
			if err := json.Unmarshal(a.runCLI("keys", "status", "--json"), &st); err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, c := range st.Columns {
				if c.Plaintext > 0 {
					got[c.Column] = c.Plaintext
				}
			}
			return got
		}
		if got := plaintext(); len(got) != 0 {
			t.Errorf("keys status counts plaintext values %v, want none: a revoke's empty body seals nothing", got)
		}
		a.runCLI("keys", "rotate")
		if err := a.db.Gorm.Raw("SELECT COUNT(*) FROM idempotency_keys WHERE operation = 'licenses.destroy' AND request_body IS NOT NULL AND LENGTH(request_body) = 0").Scan(&empty).Error; err != nil {
			t.Fatal(err)
		}
		if empty != 3 {
			t.Errorf("keys rotate sealed %d empty revoke bodies, want it to leave them: nothing to seal", 3-empty)
		}
	})
}
