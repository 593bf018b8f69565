package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The process-level accuracy test's sizes: a limit of replicaLimit a
// minute, replicaSent requests (a fifth over it) spread over
// replicaServes serves by replicaClients clients at once.
const (
	replicaServes  = 3
	replicaLimit   = 300
	replicaSent    = 360
	replicaClients = 12
)

// TestRateLimitRedisThreeServes runs three `serve` replicas on one MariaDB
// database, counting in one Redis (RATE_LIMIT_STORE=redis), and clients
// spreading one consumer's requests over them. Many clients at once: the
// replicas together allow the limit (within 5 %; with one INCR per request,
// exactly). One client, request after request, round the replicas: the
// 429s start at the request after the limit (within 5 %). A burst that
// crosses a minute (the window) is not judged: it is made again, once, by
// another consumer, in the new minute.
func TestRateLimitRedisThreeServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	redisURL := testdb.RedisURL(t)
	db := testdb.Empty(t, database.MySQL) // skipped without TEST_MYSQL_DSN (failed under CI=true)
	deleteConsumersRedisKeys(t, db, redisURL)
	// REDIS_TIMEOUT: under -race on two cores a count can take past the
	// default 100 ms, and the serve would rightly fail open; this test is
	// about the count, not the timeout (TestRateLimitRedisDownFailsOpen is).
	env := faultEnv(t, db, "", "VENDOR_DRIVER=fake", "RATE_LIMIT_STORE=redis", "REDIS_URL="+redisURL,
		fmt.Sprintf("RATE_LIMIT_PER_MINUTE=%d", replicaLimit), "REDIS_TIMEOUT=5s")
	runCmd(t, env, "migrate")
	urls, procs := startServes(t, env, replicaServes)
	for i, p := range procs {
		// Each said so as it started to listen, before it answered
		// /healthz; the line may still be on its way through the pipe
		// to the test's buffer.
		if !testkit.Poll(10*time.Second, func() bool { return strings.Contains(p.output.String(), `"rate_limit_store":"redis"`) }) {
			t.Fatalf("serve %d does not say it counts in Redis:\n%s", i, p.output.String())
		}
	}
	lo, hi := replicaLimit*95/100, replicaLimit*105/100
	consumers := 0
	// burst runs send with a consumer of its own until a run stays within
	// one minute (twice at most).
	burst := func(name string, clients int) replicaRun {
		for range 2 {
			consumers++
			token := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", fmt.Sprintf("rate-%d", consumers), "--abilities", "licenses:read"))
			r := replicaBurst(urls, token, clients)
			if !r.crossed {
				t.Logf("%s: %d requests over %d serves in %v: %d allowed, the first 429 answered request %d, statuses %v",
					name, replicaSent, replicaServes, r.ended.Sub(r.began).Round(time.Millisecond), r.allowed, r.first429, r.statuses)
				if r.statuses[http.StatusOK]+r.statuses[http.StatusTooManyRequests] != replicaSent {
					t.Errorf("%s: statuses %v, want only 200 and 429", name, r.statuses)
				}
				return r
			}
			t.Logf("%s crossed a minute (%s to %s): made again", name, r.began.Format(time.TimeOnly), r.ended.Format(time.TimeOnly))
		}
		t.Fatalf("%s crossed a minute twice", name)
		return replicaRun{}
	}
	if r := burst("many clients at once", replicaClients); r.allowed < lo || r.allowed > hi {
		t.Errorf("%d requests allowed in the window, want %d within 5 %% (%d to %d)", r.allowed, replicaLimit, lo, hi)
	}
	if r := burst("one client", 1); r.first429 < lo+1 || r.first429 > hi+1 || r.allowed != r.first429-1 {
		t.Errorf("the 429s start at request %d (%d allowed), want at %d within 5 %% (%d to %d), and none allowed after",
			r.first429, r.allowed, replicaLimit+1, lo+1, hi+1)
	}
	for _, p := range procs {
		if out := p.output.String(); strings.Contains(out, ratelimit.DegradedMessage) {
			t.Errorf("a serve counted requests alone:\n%s", out)
		}
	}
	// The counts are Redis's: a key per consumer, no row.
	var ids []string
	if err := db.Gorm.Table("consumers").Pluck("id", &ids).Error; err != nil || len(ids) != consumers {
		t.Fatalf("consumers %v (%v), want %d", ids, err, consumers)
	}
	for _, id := range ids {
		if keys := testdb.RedisKeys(t, redisURL, ratelimit.DefaultKeyPrefix+id); len(keys) == 0 {
			t.Errorf("consumer %s has no key in Redis", id)
		}
	}
	var rows int64
	if err := db.Gorm.Table("rate_limits").Count(&rows).Error; err != nil || rows != 0 {
		t.Errorf("rate_limits rows = %d (%v), want none: Redis counts", rows, err)
	}
}

// replicaRun is what one replicaBurst saw.
type replicaRun struct {
	allowed      int // 200s
	first429     int // the first 429's place in the order sent (1-based); 0: none
	statuses     map[int]int
	began, ended time.Time
	crossed      bool // began and ended in different minutes: not one window
}

// replicaBurst sends replicaSent GET /api/licenses with token from clients
// clients at once, the i-th request to serve i mod replicaServes.
func replicaBurst(urls []string, token string, clients int) replicaRun {
	var next atomic.Int64
	codes := make([]int, replicaSent)
	var wg sync.WaitGroup
	r := replicaRun{statuses: map[int]int{}, began: time.Now().UTC()}
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= replicaSent {
					return
				}
				codes[i], _, _ = send(urls[i%len(urls)]+"/api/licenses", http.MethodGet, token, "", "")
			}
		})
	}
	wg.Wait()
	r.ended = time.Now().UTC()
	r.crossed = !r.began.Truncate(time.Minute).Equal(r.ended.Truncate(time.Minute))
	for i, code := range codes {
		r.statuses[code]++
		if code == http.StatusOK {
			r.allowed++
		}
		if code == http.StatusTooManyRequests && r.first429 == 0 {
			r.first429 = i + 1
		}
	}
	return r
}
