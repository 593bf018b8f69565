package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Replica storm sizes: stormKeys idempotency keys (one domain each), each
// sent stormPerKey times at once, spread over stormReplicas serves.
const (
	stormReplicas = 3
	stormKeys     = 40
	stormPerKey   = 5
)

// stormAnswer is one request's final answer.
type stormAnswer struct {
	code     int
	replayed bool
	body     string
	tries    int // 409 request_in_progress answers before it
}

// TestFaultReplicaStorm runs three `serve` replicas on one MariaDB database
// (migrated once by `licensor migrate`) against a vendor-sim that takes
// 150 ms a call, and sends 200 creates at once: 40 idempotency keys, each
// five times with the same body, spread across the replicas. The replicas
// decide between them through the database only: exactly one create per key
// reaches the vendor and is committed, one license row per key, and every
// answer for a key is the same 201 body (the first executed, the others
// replayed, after any 409 request_in_progress); never a 5xx.
func TestFaultReplicaStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	db := testdb.Empty(t, database.MySQL)                                                                            // skipped without TEST_MYSQL_DSN (failed under CI=true)
	r := newFaultRig(t, db, []string{"--latency", "150ms"}, "IDEMPOTENCY_LOCK_TIMEOUT=30s", "RECONCILE_INTERVAL=1h") // migrates the empty database
	sim, token := r.sim, r.token
	replicas, _ := startServes(t, r.env, stormReplicas)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string][]stormAnswer{}
		ready   = make(chan struct{})
	)
	for i := range stormKeys * stormPerKey {
		key, domain := fmt.Sprintf("storm-%02d", i%stormKeys), fmt.Sprintf("storm-%02d.test", i%stormKeys)
		replica := replicas[(i/stormKeys+i)%stormReplicas] // a key's five requests go to every replica
		wg.Go(func() {
			<-ready
			a := stormSend(replica+"/api/licenses", token, key, licenseBody(domain))
			mu.Lock()
			answers[key] = append(answers[key], a)
			mu.Unlock()
		})
	}
	began := time.Now()
	close(ready)
	wg.Wait()
	t.Logf("%d requests answered in %s", stormKeys*stormPerKey, time.Since(began).Round(time.Millisecond))

	in409 := 0
	for key, as := range answers {
		executed := 0
		for _, a := range as {
			in409 += a.tries
			if a.code != http.StatusCreated {
				t.Errorf("%s: answered %d %s, want 201", key, a.code, a.body)
				continue
			}
			if !a.replayed {
				executed++
			}
			if a.body != as[0].body {
				t.Errorf("%s: two 201 bodies:\n%s\n%s", key, as[0].body, a.body)
			}
		}
		if executed != 1 {
			t.Errorf("%s: %d answers were not replays, want exactly the 1 that executed", key, executed)
		}
	}
	if len(answers) != stormKeys {
		t.Errorf("answers for %d keys, want %d", len(answers), stormKeys)
	}
	t.Logf("%d answers of 409 request_in_progress were retried", in409)

	st := sim.stats()
	if st.CreatesCommitted != stormKeys || st.DuplicatesRefused != 0 || st.Sites != stormKeys {
		t.Errorf("the vendor committed %d creates (refused %d duplicates) and holds %d sites, want %d, 0 and %d",
			st.CreatesCommitted, st.DuplicatesRefused, st.Sites, stormKeys, stormKeys)
	}
	if posts := st.Calls["POST /sites"]; len(posts) != 1 || posts["201"] != stormKeys {
		t.Errorf("POST /sites answers %v, want {201:%d}: one create per key reaches the vendor", posts, stormKeys)
	}
	var rows int64
	if err := db.Gorm.Table("licenses").Count(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if rows != stormKeys {
		t.Errorf("%d license rows, want %d", rows, stormKeys)
	}
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusCompleted] != stormKeys || len(c) != 1 {
		t.Errorf("intents by status %v, want %d completed and nothing else", c, stormKeys)
	}
}

// stormSend sends a keyed create until it gets an answer other than 409
// request_in_progress (each honoured briefly, within a deadline).
func stormSend(url, token, key, body string) stormAnswer {
	var a stormAnswer
	for deadline := time.Now().Add(30 * time.Second); ; a.tries++ {
		code, h, got := send(url, http.MethodPost, token, key, body)
		a.code, a.body, a.replayed = code, got, h.Get("Idempotent-Replayed") == "true"
		if code != http.StatusConflict || !strings.Contains(got, `"request_in_progress"`) || time.Now().After(deadline) {
			return a
		}
		if h.Get("Retry-After") == "" {
			a.body = "409 request_in_progress without Retry-After: " + got
			return a
		}
		<-time.After(100 * time.Millisecond) // shorter than its Retry-After: keeps the storm short
	}
}
