package tests

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The storm: galeraRequests concurrent creates over galeraKeys idempotency
// keys, each key's requests sent round-robin over the replicas, so that the
// same key is reserved on two or three Galera nodes at once.
const (
	galeraNodes    = 3
	galeraKeys     = 40
	galeraRequests = 200
	galeraLatency  = 150 * time.Millisecond
)

// TestGaleraReplicaStorm runs licensor on a three-node MariaDB Galera
// cluster (synchronous multi-primary) the test starts on local ports, one
// `serve` replica per node. Galera checks a transaction against the others
// only at COMMIT: two nodes inserting the same idempotency key each succeed
// locally, and the one certified second gets a deadlock (1213) instead of a
// duplicate key. licensor's conflict retry and its unique indexes must turn
// that into exactly one vendor create and one license per key, every client
// getting the same 201, and never a 5xx as a final answer ("storm"). Then
// a replica is started on a node whose appliers are paused while a
// migration commits through another node: it must wait for the node to
// catch up, not refuse the schema as behind ("lagging node"). Transactions
// through licensor's database pool that a replicated write aborts must
// never report a commit that did not happen ("commits under brute-force
// aborts"). Then the
// last node is cut off the cluster: its replica must answer 503 with
// Retry-After, not 500, while the others go on ("non-primary node"). See
// docs/galera.md.
func TestGaleraReplicaStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node MariaDB Galera cluster and the licensor binary")
	}
	began := time.Now()
	cluster := newGaleraCluster(t, galeraNodes)
	clusterUp := time.Since(began)

	// The storm's requests leave together, 200 of one consumer: the rig
	// has the rate limits off. It migrates through node 1.
	r := newFaultRig(t, &testdb.DB{Dialect: database.MySQL, Config: config.DB{URL: cluster.nodes[0].dsn()}},
		[]string{"--latency", galeraLatency.String()}, "APP_URL=http://licensor.galera.test", "VENDOR_TIMEOUT=10s")
	sim, token := r.sim, r.token
	envFor := func(dsn string, extra ...string) []string {
		return append(append(slices.Clone(r.env), "DB_URL="+dsn, "APP_STORAGE="+t.TempDir()), extra...)
	}
	envOn := func(n *galeraNode, extra ...string) []string { return envFor(n.dsn(), extra...) }
	// Galera applies the migration on the other nodes a moment after node
	// 1 committed it: no replica starts on a node it has not reached.
	cluster.waitMigrated(galeraDatabase)
	galeraSchemaFits(t, cluster.nodes[len(cluster.nodes)-1])

	// One replica per node, each pointed at its own node.
	apis := make([]string, galeraNodes)
	serves := make([]*process, galeraNodes)
	for i, n := range cluster.nodes {
		apis[i] = testkit.FreeAddr(t)
		serves[i] = start(t, envOn(n, "APP_ADDR="+apis[i]), "serve")
	}
	for _, api := range apis {
		waitFor(t, "http://"+api+"/healthz", "", http.StatusOK)
	}
	// Each key reserved on two or three nodes at once: one create, one 201.
	t.Run("storm", func(t *testing.T) {
		galeraStormChecks(t, cluster, apis, serves, token, sim)
	})
	// A replica started on a node the newest migration has not reached
	// yet waits for it instead of refusing the schema.
	t.Run("lagging node", func(t *testing.T) {
		galeraLaggingNode(t, cluster, envFor)
	})
	// A transaction that commits is committed, also when replicated
	// writes keep aborting transactions on its node.
	t.Run("commits under brute-force aborts", func(t *testing.T) {
		galeraCommitsHold(t, cluster)
	})
	// A node cut off the cluster: its replica answers "not now".
	t.Run("non-primary node", func(t *testing.T) {
		galeraIsolated(t, cluster, apis, token, sim)
	})
	t.Logf("cluster up in %s, whole test %s", clusterUp.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// galeraStormChecks sends the storm and checks its outcome: every answer,
// the vendor, the rows on every node and the replicas' logs.
func galeraStormChecks(t *testing.T, cluster *galeraCluster, apis []string, serves []*process, token string, sim *faultSim) {
	before := cluster.conflictCounters(t)

	stormBegan := time.Now()
	answers := galeraStorm(t, apis, token)
	storm := time.Since(stormBegan)

	// Every request has a final answer: the one 201 of its key.
	var inProgress, unavailable, retries int
	perNode := make([]int, galeraNodes)
	byKey := map[string][]galeraAnswer{}
	for _, a := range answers {
		inProgress += a.inProgress
		unavailable += a.unavailable
		retries += a.attempts - 1
		perNode[a.replica]++
		byKey[a.key] = append(byKey[a.key], a)
		if a.status >= 500 || a.status == 0 {
			t.Errorf("%s via replica %d: final answer %d %s", a.key, a.replica+1, a.status, a.body)
		} else if a.status != http.StatusCreated {
			t.Errorf("%s via replica %d: final answer %d %s, want 201", a.key, a.replica+1, a.status, a.body)
		}
	}
	licenseIDs := map[string]string{} // license id -> key
	for k := range galeraKeys {
		key, domain := galeraKey(k)
		got := byKey[key]
		if len(got) != galeraRequests/galeraKeys {
			t.Errorf("%s: %d answers, want %d", key, len(got), galeraRequests/galeraKeys)
			continue
		}
		executed := 0
		for _, a := range got {
			if a.body != got[0].body {
				t.Errorf("%s: two bodies for one key:\n  replica %d: %s\n  replica %d: %s", key, got[0].replica+1, got[0].body, a.replica+1, a.body)
			}
			if !a.replayed {
				executed++
			}
		}
		if executed > 1 {
			t.Errorf("%s: %d answers were not replays: the key was executed more than once", key, executed)
		}
		lic := decodeLicense(got[0].body)
		if lic.Domain != domain || lic.ID == "" || lic.VendorSiteID == "" {
			t.Errorf("%s: answered %s, want the license of %s", key, got[0].body, domain)
			continue
		}
		if other, dup := licenseIDs[lic.ID]; dup {
			t.Errorf("license %s answered for %s and %s", lic.ID, other, key)
		}
		licenseIDs[lic.ID] = key
	}

	// The vendor made exactly one site per key.
	st := sim.stats()
	creates, sites := st.CreatesCommitted, st.Sites
	if creates != galeraKeys || sites != galeraKeys || st.DuplicatesRefused != 0 {
		t.Errorf("the vendor committed %d creates, refused %d duplicates (a key executed twice) and holds %d sites, want %d, 0 and %d",
			creates, st.DuplicatesRefused, sites, galeraKeys, galeraKeys)
	}
	t.Logf("vendor stats: %+v", st)

	// Every node holds the same 40 licenses and 40 completed records, read
	// causally (wsrep_sync_wait) so that a lagging applier cannot hide a row.
	for _, n := range cluster.nodes {
		rows, records := galeraRows(t, n)
		if len(rows) != galeraKeys {
			t.Errorf("%s holds %d license domains, want %d", n.name, len(rows), galeraKeys)
		}
		for domain, count := range rows {
			if count != 1 {
				t.Errorf("%s holds %d licenses for %s, want 1", n.name, count, domain)
			}
		}
		if records != fmt.Sprint(galeraKeys)+" completed/201" {
			t.Errorf("%s: licenses.store records: %s, want %d completed/201", n.name, records, galeraKeys)
		}
	}

	after := cluster.conflictCounters(t)
	// An error a replica logged (a record it failed to settle, say) fails
	// the test. A warning is reported only: each replica writes a token's
	// last_used_at once a minute, the same row on every node, and the write
	// that loses certification is dropped with a warning (best effort: the
	// token's next use records it again).
	var logged []string
	for i, p := range serves {
		if lines := galeraLogLines(p.output.String(), "ERROR"); len(lines) > 0 {
			t.Errorf("replica %d logged errors:\n  %s", i+1, strings.Join(lines, "\n  "))
		}
		if lines := galeraLogLines(p.output.String(), "WARN"); len(lines) > 0 {
			logged = append(logged, fmt.Sprintf("replica %d:\n  %s", i+1, strings.Join(lines, "\n  ")))
		}
	}
	t.Logf("storm of %d requests over %d keys and %d replicas (%v each) in %s",
		galeraRequests, galeraKeys, galeraNodes, perNode, storm.Round(time.Millisecond))
	t.Logf("transient answers retried: %d × 409 request_in_progress, %d × 503 with Retry-After (%d retries in all)",
		inProgress, unavailable, retries)
	t.Logf("vendor: %d creates committed, %d sites; Galera conflicts during the storm (cert failures / BF aborts per node): %s",
		creates, sites, galeraCounterDelta(before, after))
	if len(logged) > 0 {
		t.Logf("serve logged warnings:\n%s", strings.Join(logged, "\n"))
	}
}

// galeraLogLines are the log lines (LOG_FORMAT=json) at the levels.
func galeraLogLines(out string, levels ...string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		for _, l := range levels {
			if strings.Contains(line, `"level":"`+l+`"`) {
				lines = append(lines, line)
				break
			}
		}
	}
	return lines
}

// galeraIsolated cuts the last node off the cluster (gmcast.isolate): it
// leaves the primary component and refuses application statements (MariaDB
// error 1047, "WSREP has not yet prepared node for application use"). Its
// replica must answer "not now" (503 with Retry-After, /readyz not ready),
// never 500, and create nothing at the vendor.
func galeraIsolated(t *testing.T, c *galeraCluster, apis []string, token string, sim *faultSim) {
	t.Helper()
	last := len(c.nodes) - 1
	n := c.nodes[last]
	if _, err := n.db.Exec("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"); err != nil {
		t.Fatalf("isolate %s: %v", n.name, err)
	}
	var st map[string]string
	isolated := func() bool {
		var err error
		st, err = n.status(context.Background())
		return err == nil && st["wsrep_cluster_status"] != "Primary"
	}
	if !testkit.Poll(30*time.Second, isolated) {
		t.Fatalf("%s still in the primary component after its isolation", n.name)
	}
	t.Logf("%s isolated: cluster_status=%s ready=%s", n.name, st["wsrep_cluster_status"], st["wsrep_ready"])
	api := "http://" + apis[last]
	before := sim.stats().CreatesCommitted
	for _, r := range []struct{ method, path, key, body string }{
		{http.MethodPost, "/api/licenses", "galera-isolated", `{"name":"Isolated","domain":"isolated.test"}`},
		{http.MethodPost, "/api/licenses", "", `{"name":"Isolated","domain":"isolated2.test"}`},
		{http.MethodGet, "/api/licenses", "", ""},
		{http.MethodGet, "/readyz", "", ""},
	} {
		code, h, body := send(api+r.path, r.method, token, r.key, r.body)
		t.Logf("isolated replica: %s %s key=%q = %d Retry-After=%q %s", r.method, r.path, r.key, code, h.Get("Retry-After"), galeraTail(body, 300))
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("%s %s on the replica of the isolated node = %d %s, want 503 with Retry-After", r.method, r.path, code, body)
		}
	}
	if after := sim.stats().CreatesCommitted; after != before {
		t.Errorf("the vendor committed %d creates for the isolated replica", after-before)
	}
	// The other nodes go on as a primary component of two, and so do their
	// replicas.
	code, _, body := send("http://"+apis[0]+"/api/licenses", http.MethodPost, token, "galera-after-isolation",
		`{"name":"Survivor","domain":"survivor.test"}`)
	if code != http.StatusCreated {
		t.Errorf("create through replica 1 while %s is cut off = %d %s, want 201", n.name, code, body)
	}
}

// galeraLaggingNode starts a replica on a node that has not applied the
// newest migration yet, for certain: node 2's appliers are held by FLUSH
// TABLES WITH READ LOCK (which desyncs the node and pauses its applying)
// while `licensor migrate` runs through node 1 on a database of its own.
// serve must not refuse the schema as behind: it waits (a causal read) for
// the node to apply what the cluster committed, and serves once the lock is
// let go and the node has caught up.
func galeraLaggingNode(t *testing.T, c *galeraCluster, envFor func(dsn string, extra ...string) []string) {
	t.Helper()
	const lagDatabase = "licensor_lag"
	first, n := c.nodes[0], c.nodes[1]
	ctx := context.Background()
	if _, err := first.db.Exec("CREATE DATABASE `" + lagDatabase + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		t.Fatal(err)
	}
	// The database itself reaches node 2 before its appliers pause.
	if _, err := n.db.Exec("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"); err != nil {
		t.Fatalf("%s: causal read: %v", n.name, err)
	}
	lock, err := n.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatalf("%s: FLUSH TABLES WITH READ LOCK: %v", n.name, err)
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
				t.Errorf("%s: UNLOCK TABLES: %v", n.name, err)
			}
		}
	}
	defer unlock()

	runCmd(t, envFor(first.dsnOf(lagDatabase)), "migrate")
	want, err := first.gooseVersion(ctx, lagDatabase)
	if err != nil || want == 0 {
		t.Fatalf("%s: migrated to version %d: %v", first.name, want, err)
	}
	if got, _ := n.gooseVersion(ctx, lagDatabase); got == want {
		t.Fatalf("%s already holds migration %d with its appliers paused: the test cannot show a lagging node", n.name, want)
	}

	api := "http://" + testkit.FreeAddr(t)
	p := start(t, envFor(n.dsnOf(lagDatabase), "APP_ADDR="+strings.TrimPrefix(api, "http://")), "serve")
	waiting := func() bool {
		// A command that fails prints "licensor: " and the error, and exits.
		if out := p.output.String(); strings.Contains(out, "licensor: ") || strings.Contains(out, `"level":"ERROR"`) {
			t.Fatalf("serve on %s, which has not applied migration %d yet, gave up instead of waiting for it:\n%s", n.name, want, out)
		}
		var waits int
		err := n.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE '%wsrep_sync_wait%'").Scan(&waits)
		return err == nil && waits > 0
	}
	if !testkit.Poll(20*time.Second, waiting) {
		t.Fatalf("serve on %s never waited for the node to catch up:\n%s", n.name, p.output.String())
	}
	unlock()
	unlocked := time.Now()
	waitFor(t, api+"/readyz", "", http.StatusOK)
	t.Logf("serve on %s waited for migration %d while the node's appliers were paused; ready %s after they resumed",
		n.name, want, time.Since(unlocked).Round(time.Millisecond))
	if got, err := n.gooseVersion(ctx, lagDatabase); got != want {
		t.Errorf("%s holds migration %d (%v) once its replica serves, want %d", n.name, got, err, want)
	}
	c.waitSynced(n, len(c.nodes))
}

// galeraCommitsHold runs, for galeraStressFor, transactions shaped like
// licensor's license create (two INSERTs, an UPDATE of a row other nodes
// write too, a SELECT, COMMIT) through a pool database.Open makes on node 1,
// while node 2 keeps updating the same rows: node 1's appliers then abort
// ("brute force") many of them, which must answer an error (1213) to a
// statement or to COMMIT. Every transaction whose COMMIT answered success
// must be there afterwards. With server-side prepared statements about one
// in a hundred was not: MariaDB answered COMMIT with success after the abort
// had rolled it back, and the storm saw it as a 201 for a license that
// never existed and its key executed again a lease later.
func galeraCommitsHold(t *testing.T, c *galeraCluster) {
	t.Helper()
	const stressDatabase = "licensor_stress"
	first, second := c.nodes[0], c.nodes[1]
	for _, stmt := range []string{
		"CREATE DATABASE `" + stressDatabase + "`",
		"CREATE TABLE `" + stressDatabase + "`.hot (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO `" + stressDatabase + "`.hot VALUES (1, 0), (2, 0), (3, 0), (4, 0)",
		"CREATE TABLE `" + stressDatabase + "`.made (id VARCHAR(40) PRIMARY KEY, n BIGINT NOT NULL, UNIQUE KEY (n))",
		"CREATE TABLE `" + stressDatabase + "`.made_events (id BIGINT AUTO_INCREMENT PRIMARY KEY, made_id VARCHAR(40) NOT NULL)",
	} {
		if _, err := first.db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := second.db.Exec("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"); err != nil {
		t.Fatal(err)
	}
	pool, err := database.Open(context.Background(), config.DB{Connection: database.MySQL, URL: first.dsnOf(stressDatabase),
		MaxOpenConns: 20, MaxIdleConns: 20, QueryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close(pool)
	before, err := first.status(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 4 { // node 2: the replicated writes that abort node 1's transactions
		writers.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = second.db.Exec("UPDATE `"+stressDatabase+"`.hot SET v = v + 1 WHERE id = ?", 1+i%4)
			}
		})
	}
	var seq, failed atomic.Int64
	var mu sync.Mutex
	var committed []string
	var workers sync.WaitGroup
	deadline := time.Now().Add(galeraStressFor)
	for range 12 {
		workers.Go(func() {
			for time.Now().Before(deadline) {
				n := seq.Add(1)
				id := fmt.Sprintf("made-%d", n)
				err := pool.Transaction(func(tx *gorm.DB) error {
					if err := tx.Exec("INSERT INTO made (id, n) VALUES (?, ?)", id, n).Error; err != nil {
						return err
					}
					if err := tx.Exec("INSERT INTO made_events (made_id) VALUES (?)", id).Error; err != nil {
						return err
					}
					if err := tx.Exec("UPDATE hot SET v = v + 1 WHERE id = ?", 1+n%4).Error; err != nil {
						return err
					}
					var ids []int64
					return tx.Raw("SELECT id FROM hot WHERE id = ? AND v < 0", 1+n%4).Scan(&ids).Error
				})
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				committed = append(committed, id)
				mu.Unlock()
			}
		})
	}
	workers.Wait()
	close(stop)
	writers.Wait()

	after, err := first.status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	aborts := galeraCounter(after, "wsrep_local_bf_aborts") - galeraCounter(before, "wsrep_local_bf_aborts")
	present := map[string]bool{}
	rows, err := first.db.Query("SELECT id FROM `" + stressDatabase + "`.made")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		present[id] = true
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, id := range committed {
		if !present[id] {
			lost = append(lost, id)
		}
	}
	t.Logf("%d transactions committed, %d failed (%d brute-force aborts on %s), %d of the committed missing",
		len(committed), failed.Load(), aborts, first.name, len(lost))
	if len(lost) > 0 {
		t.Errorf("%d transactions answered COMMIT with success and are not there (%s …)", len(lost), lost[0])
	}
	if aborts < 100 || len(committed) < 100 {
		t.Errorf("%d brute-force aborts and %d commits on %s: too few for the test to show anything", aborts, len(committed), first.name)
	}
}

// galeraStressFor is how long galeraCommitsHold runs its transactions.
const galeraStressFor = 8 * time.Second

// galeraCounter is a numeric wsrep status variable.
func galeraCounter(st map[string]string, name string) int {
	n, _ := strconv.Atoi(st[name])
	return n
}

// galeraSchemaFits checks, on a node other than the one migrated, that the
// migration replicated and that every table suits Galera: InnoDB (the only
// engine it replicates) with a primary key (without one, a row change
// cannot be certified or applied by key).
func galeraSchemaFits(t *testing.T, n *galeraNode) {
	t.Helper()
	rows, err := n.db.Query(`SELECT t.table_name, t.engine,
  (SELECT COUNT(*) FROM information_schema.table_constraints c
    WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.constraint_type = 'PRIMARY KEY')
FROM information_schema.tables t WHERE t.table_schema = ? AND t.table_type = 'BASE TABLE'`, galeraDatabase)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name, engine string
		var pk int
		if err := rows.Scan(&name, &engine, &pk); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
		if engine != "InnoDB" || pk != 1 {
			t.Errorf("table %s: engine %s, %d primary key(s); Galera needs InnoDB with a primary key", name, engine, pk)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 3 {
		t.Fatalf("%s holds tables %v after the migration on node1: it did not replicate", n.name, tables)
	}
}

// galeraKey is the idempotency key and the domain of key number k.
func galeraKey(k int) (key, domain string) {
	return fmt.Sprintf("galera-order-%02d", k), fmt.Sprintf("galera-%02d.test", k)
}

// galeraAnswer is a request's final answer, after its transient ones.
type galeraAnswer struct {
	key         string
	replica     int
	status      int
	body        string
	replayed    bool
	attempts    int
	inProgress  int // 409 request_in_progress answers retried
	unavailable int // 503 answers with Retry-After retried
}

// galeraStorm sends galeraRequests creates at once, request j of key k to
// replica (k+j) mod n, the same body for every request of a key. Each
// retries 409 request_in_progress and 503 with Retry-After, after the
// Retry-After, until a final answer.
func galeraStorm(t *testing.T, apis []string, token string) []galeraAnswer {
	t.Helper()
	answers := make([]galeraAnswer, galeraRequests)
	// Connections opened beforehand, so that the requests leave together
	// and a key's reach their nodes within a replication round trip.
	client := &http.Client{Transport: contractTransport{base: &http.Transport{
		MaxIdleConns: 2 * galeraRequests, MaxIdleConnsPerHost: galeraRequests, IdleConnTimeout: time.Minute,
	}}}
	galeraWarm(client, apis, galeraRequests/len(apis)+1)
	deadline := time.Now().Add(90 * time.Second)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range galeraRequests {
		k, j := i%galeraKeys, i/galeraKeys
		key, domain := galeraKey(k)
		body := fmt.Sprintf(`{"name":"Galera %02d","domain":"%s"}`, k, domain)
		a := &answers[i]
		a.key, a.replica = key, (k+j)%len(apis)
		url := "http://" + apis[a.replica] + "/api/licenses"
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for {
				a.attempts++
				code, h, got := sendWith(client, url, http.MethodPost, token, key, body)
				a.status, a.body, a.replayed = code, got, h.Get("Idempotent-Replayed") == "true"
				wait, transient := galeraRetryAfter(h)
				switch {
				case code == http.StatusConflict && strings.Contains(got, `"request_in_progress"`):
					a.inProgress++
				case code == http.StatusServiceUnavailable && transient:
					a.unavailable++
				default:
					return
				}
				if time.Now().Add(wait).After(deadline) {
					return // its last answer stands, and fails the test
				}
				time.Sleep(wait)
			}
		}()
	}
	close(gate)
	wg.Wait()
	return answers
}

// galeraWarm opens n kept-alive connections to each replica.
func galeraWarm(client *http.Client, apis []string, n int) {
	var wg sync.WaitGroup
	for _, api := range apis {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sendWith(client, "http://"+api+"/healthz", http.MethodGet, "", "", "")
			}()
		}
	}
	wg.Wait()
}

// galeraRetryAfter is the pause a Retry-After header asks for (in seconds),
// and whether there was one.
func galeraRetryAfter(h http.Header) (time.Duration, bool) {
	if h == nil || h.Get("Retry-After") == "" {
		return 0, false
	}
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return time.Second, true
	}
	return min(max(time.Duration(s)*time.Second, 50*time.Millisecond), 5*time.Second), true
}

// galeraRows reads the node's licenses (count per domain) and a summary of
// its licenses.store records, waiting for the node to have applied every
// write the cluster committed before the read (wsrep_sync_wait=1).
func galeraRows(t *testing.T, n *galeraNode) (map[string]int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := n.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT domain, COUNT(*) FROM "+galeraDatabase+".licenses GROUP BY domain")
	if err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
	defer rows.Close()
	domains := map[string]int{}
	for rows.Next() {
		var d string
		var c int
		if err := rows.Scan(&d, &c); err != nil {
			t.Fatal(err)
		}
		domains[d] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	recs, err := conn.QueryContext(ctx, "SELECT status, COALESCE(response_status, 0), COUNT(*) FROM "+galeraDatabase+
		".idempotency_keys WHERE operation = 'licenses.store' GROUP BY status, response_status ORDER BY status")
	if err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
	defer recs.Close()
	var summary []string
	for recs.Next() {
		var status string
		var code, c int
		if err := recs.Scan(&status, &code, &c); err != nil {
			t.Fatal(err)
		}
		summary = append(summary, fmt.Sprintf("%d %s/%d", c, status, code))
	}
	return domains, strings.Join(summary, ", ")
}

// conflictCounters are each node's wsrep_local_cert_failures (its
// transactions that lost certification at COMMIT) and wsrep_local_bf_aborts
// (its transactions aborted by a replicated one).
func (c *galeraCluster) conflictCounters(t *testing.T) [][2]int {
	t.Helper()
	out := make([][2]int, len(c.nodes))
	for i, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := n.status(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: SHOW STATUS: %v", n.name, err)
		}
		out[i] = [2]int{galeraCounter(st, "wsrep_local_cert_failures"), galeraCounter(st, "wsrep_local_bf_aborts")}
	}
	return out
}

func galeraCounterDelta(before, after [][2]int) string {
	var parts []string
	for i := range after {
		parts = append(parts, fmt.Sprintf("node%d %d/%d", i+1, after[i][0]-before[i][0], after[i][1]-before[i][1]))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
