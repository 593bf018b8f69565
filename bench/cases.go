package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
)

// mainDB is the database of the everyday cases: licensor serving it, a
// token of consumer "bench", and one completed create to replay.
type mainDB struct {
	t       *dbTarget
	srv     *process
	token   string
	key     string // the replayed create's Idempotency-Key
	body    []byte // its body
	license created
}

// replay is the replayed create on a server at url.
func (m *mainDB) replay(url string) requestFunc {
	return fixedPost(url+"/api/licenses", m.token, m.key, m.body)
}

// creates are new creates (keyed: each with a key of its own) on a server
// at url.
func (m *mainDB) creates(keyed bool) func(url string) requestFunc {
	return func(url string) requestFunc { return creates(url+"/api/licenses", m.token, keyed) }
}

// show is GET /api/licenses/{id} of the replayed create's license.
func (m *mainDB) show(url string) requestFunc {
	return get(url+"/api/licenses/"+m.license.ID, m.token)
}

// list is the first cursor page of the consumer's licenses (GET
// /api/licenses?cursor=).
func (m *mainDB) list(url string) requestFunc {
	return get(url+"/api/licenses?cursor=", m.token)
}

// current is the server now serving the main database.
func (m *mainDB) current() *process { return m.srv }

// restart replaces the main server with one started with extra settings.
func (b *bench) restart(ctx context.Context, m *mainDB, extraEnv ...string) (*process, error) {
	if m.srv != nil {
		if err := b.stopProcess(m.srv); err != nil {
			return nil, err
		}
		m.srv = nil
	}
	p, err := b.startLicensor(ctx, m.t, extraEnv...)
	if err != nil {
		return nil, err
	}
	m.srv = p
	return p, nil
}

// runDialect runs every asked-for comparison on one kind of database.
func (b *bench) runDialect(ctx context.Context, dialect string) (*dbReport, error) {
	rep := &dbReport{title: "SQLite (embedded, pure-Go driver)", short: dialect}
	if dialect == dialectMySQL {
		v, err := mysqlVersion(ctx, b.opts.mysqlDSN)
		if err != nil {
			return nil, err
		}
		rep.title = "MariaDB " + v
		var how string
		if b.dbPid, how = serverPID(ctx, b.opts.mysqlDSN); b.dbPid == 0 {
			rep.notes = append(rep.notes, "the MariaDB server process behind the DSN was not found ("+how+"): its CPU is not measured")
		} else {
			fmt.Fprintf(b.errOut, "MariaDB server: pid %d (%s)\n", b.dbPid, how)
		}
		defer func() { b.dbPid = 0 }()
	}
	fmt.Fprintf(b.errOut, "== %s\n", rep.title)
	if b.opts.want(cmpReplayShow) || b.opts.want(cmpCreate) || b.opts.want(cmpFiber) || b.opts.want(cmpRateLimit) || b.opts.want(cmpRSS) || b.opts.want(cmpGC) || b.opts.want(cmpFloor) || b.opts.want(cmpCache) ||
		(b.opts.baseline != "" && b.opts.want(cmpBaseline)) {
		if err := b.runMain(ctx, dialect, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.want(cmpIdemScale) {
		if err := b.runIdemScale(ctx, dialect, rep); err != nil {
			return rep, err
		}
	}
	if b.opts.want(cmpList) {
		if err := b.runList(ctx, dialect, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func mysqlVersion(ctx context.Context, dsn string) (string, error) {
	db, err := serverDB(dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("MariaDB at -mysql: %w", err)
	}
	return v, nil
}

// setupMain starts licensor on a fresh main database and makes the create
// that the replay cases repeat, checking that a repeat is a replay.
func (b *bench) setupMain(ctx context.Context, dialect string) (*mainDB, error) {
	return b.setupMainOf(ctx, b.bin, dialect, "main")
}

// setupMainOf is setupMain for the licensor at bin, on a database of its own
// named by suffix.
func (b *bench) setupMainOf(ctx context.Context, bin, dialect, suffix string) (*mainDB, error) {
	t, err := b.newTargetOf(ctx, bin, dialect, suffix)
	if err != nil {
		return nil, err
	}
	m := &mainDB{t: t, key: newKey()}
	if m.token, err = b.issueToken(ctx, t, "bench"); err != nil {
		return nil, err
	}
	if _, err := b.restart(ctx, m); err != nil {
		return nil, err
	}
	domain := nextDomain()
	m.body = licenseBody("Bench", domain)
	if m.license, err = create(ctx, m.srv.url, m.token, m.key, domain); err != nil {
		return m, err
	}
	again, err := create(ctx, m.srv.url, m.token, m.key, domain)
	if err != nil {
		return m, err
	}
	if m.license.Status != http.StatusCreated || again.Status != http.StatusCreated || !again.Replayed {
		return m, fmt.Errorf("the replay setup: first %d, repeat %d (replayed %v); want 201 twice, the repeat replayed",
			m.license.Status, again.Status, again.Replayed)
	}
	return m, nil
}

// runMain runs the comparisons on the main database: replay vs show, keyed
// vs keyless create, licensor vs the Fiber peer, rate limit on vs off, and
// the RSS runs.
func (b *bench) runMain(ctx context.Context, dialect string, rep *dbReport) (err error) {
	m, err := b.setupMain(ctx, dialect)
	if m != nil {
		defer func() {
			if m.srv != nil {
				err = errors.Join(err, b.stopProcess(m.srv))
			}
		}()
	}
	if err != nil {
		return err
	}
	conns := b.opts.conns
	if b.opts.want(cmpReplayShow) {
		err := b.compare(ctx, rep, cmpReplayShow,
			fixedCase("replay (POST, same key)", conns, m.current, m.replay),
			fixedCase("show (GET /api/licenses/{id})", conns, m.current, m.show))
		if err != nil {
			return err
		}
	}
	if b.opts.want(cmpCreate) {
		err := b.compare(ctx, rep, cmpCreate,
			fixedCase("keyed create (new key, domain)", conns, m.current, m.creates(true)),
			fixedCase("keyless create (new domain)", conns, m.current, m.creates(false)))
		if err != nil {
			return err
		}
	}
	var peer, same *peerServer
	if b.opts.want(cmpFiber) || b.opts.want(cmpRSS) || b.opts.want(cmpFloor) {
		if peer, err = b.startPeer(ctx, m, fiberPeer); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, b.stopProcess(peer.proc)) }()
		if same, err = b.startPeer(ctx, m, echoPeer); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, b.stopProcess(same.proc)) }()
	}
	if b.opts.want(cmpFiber) {
		err := b.compareRounds(ctx, rep, cmpFiber, []caseSpec{
			fixedCase("licensor replay", conns, m.current, m.replay),
			fixedCase("Fiber idempotency replay", conns, peer.current, peer.replay),
			fixedCase("same-stack (Echo) idempotency replay", conns, same.current, same.replay),
		}, []pairing{
			{cmpFiber + ": licensor vs Fiber replay", 0, 1},
			{cmpFiber + ": licensor vs same-stack (Echo) replay", 0, 2},
			{cmpFiber + ": same-stack (Echo) vs Fiber replay", 2, 1},
		})
		if err != nil {
			return err
		}
	}
	if b.opts.want(cmpFloor) {
		if err := b.floorCases(ctx, rep, m, peer, same); err != nil {
			return err
		}
	}
	if b.opts.want(cmpRateLimit) {
		if err := b.rateLimitCases(ctx, rep, dialect, m); err != nil {
			return err
		}
	}
	if b.opts.want(cmpGC) {
		if err := b.gcCases(ctx, rep, m); err != nil {
			return err
		}
	}
	if b.opts.want(cmpCache) {
		if err := b.cacheCases(ctx, rep, m); err != nil {
			return err
		}
	}
	if b.opts.baseline != "" && b.opts.want(cmpBaseline) {
		if err := b.baselineCases(ctx, rep, dialect, m); err != nil {
			return err
		}
	}
	if b.opts.want(cmpRSS) {
		if err := b.rssRun(ctx, rep, "licensor replay", func(ctx context.Context) (*process, error) { return b.restart(ctx, m) }, m.replay); err != nil {
			return err
		}
		if err := b.rssRun(ctx, rep, "Fiber replay", peer.restart, peer.replay); err != nil {
			return err
		}
		if err := b.rssRun(ctx, rep, "same-stack (Echo) replay", same.restart, same.replay); err != nil {
			return err
		}
	}
	return nil
}

// floorCases measure what a request costs the servers before any
// database: GET /healthz, which reads nothing and answers a constant
// body, through each server's whole stack (licensor: net/http, Echo and
// its middleware chain; the Fiber peer: fasthttp and Fiber; the same-stack
// peer: net/http and bare Echo, no middleware). Against each other, and
// licensor's against each peer's whole replay: the rate that no replay of
// licensor's can pass, whatever its statement costs.
func (b *bench) floorCases(ctx context.Context, rep *dbReport, m *mainDB, peer, same *peerServer) error {
	conns := b.opts.conns
	// The same request to all (none reads its bearer token).
	health := func(url string) requestFunc { return get(url+"/healthz", m.token) }
	cases := []caseSpec{
		fixedCase("licensor GET /healthz", conns, m.current, health),
		fixedCase("Fiber GET /healthz", conns, peer.current, health),
		fixedCase("Fiber idempotency replay", conns, peer.current, peer.replay),
		fixedCase("licensor replay", conns, m.current, m.replay),
		fixedCase("same-stack (bare Echo) GET /healthz", conns, same.current, health),
		fixedCase("same-stack (Echo) idempotency replay", conns, same.current, same.replay),
	}
	return b.compareRounds(ctx, rep, cmpFloor, cases, []pairing{
		{cmpFloor + ": licensor vs Fiber, GET /healthz (no database)", 0, 1},
		{cmpFloor + ": licensor vs same-stack (bare Echo), GET /healthz (no database)", 0, 4},
		{cmpFloor + ": licensor GET /healthz vs Fiber's replay", 0, 2},
		{cmpFloor + ": licensor GET /healthz vs same-stack (Echo) replay", 0, 5},
		{cmpFloor + ": licensor replay vs licensor GET /healthz", 3, 0},
	})
}

// rateLimitOn is the limit of the rate limit cases: never reached, so
// that every request is counted and every answer is the replay.
const rateLimitOn = 100_000_000

// rateLimitCases compares the replay with the rate limit on and off. On
// SQLite the limit counts in memory (the default there). On MariaDB it
// counts in Redis (RATE_LIMIT_STORE=redis, when -redis answers) and in the
// database (the default there), each also batched (RATE_LIMIT_BATCH), each
// against off and against each other, from one set of alternated rounds
// (redis, database, off, …).
func (b *bench) rateLimitCases(ctx context.Context, rep *dbReport, dialect string, m *mainDB) error {
	limited := func(name string, redisPid int, env ...string) caseSpec {
		return b.restartedReplay(m, name, redisPid, env...)
	}
	title := cmpRateLimit + " (replay)"
	off := limited("rate limit off (0)", 0, rateLimitEnv(0))
	var err error
	switch {
	case dialect == dialectSQLite:
		err = b.compare(ctx, rep, title, limited("rate limit on: memory (the default)", 0, rateLimitEnv(rateLimitOn)), off)
	default:
		dbCase := limited("rate limit on: database (the default without REDIS_URL)", 0, rateLimitEnv(rateLimitOn), "RATE_LIMIT_STORE=database")
		dbBatched := limited(fmt.Sprintf("rate limit on: database, RATE_LIMIT_BATCH=%d", b.opts.batch), 0, rateLimitEnv(rateLimitOn),
			"RATE_LIMIT_STORE=database", fmt.Sprintf("RATE_LIMIT_BATCH=%d", b.opts.batch))
		r, why := findRedis(ctx, b.opts.redisURL)
		if r == nil {
			rep.notes = append(rep.notes, "the rate limit's redis store was not measured: "+why)
			err = b.compareRounds(ctx, rep, title, []caseSpec{dbCase, off, dbBatched}, []pairing{
				{title + ": database vs off", 0, 1},
				{title + ": database batched vs off", 2, 1},
			})
			break
		}
		if r.pid == 0 {
			rep.notes = append(rep.notes, "the Redis server's process was not found here: its CPU is not measured")
		}
		rep.notes = append(rep.notes, "the redis store counts in "+r.redactedURL())
		redisCase := limited("rate limit on: redis", r.pid, rateLimitEnv(rateLimitOn), "RATE_LIMIT_STORE=redis", "REDIS_URL="+r.url)
		batched := limited(fmt.Sprintf("rate limit on: redis, RATE_LIMIT_BATCH=%d", b.opts.batch), r.pid, rateLimitEnv(rateLimitOn),
			"RATE_LIMIT_STORE=redis", "REDIS_URL="+r.url, fmt.Sprintf("RATE_LIMIT_BATCH=%d", b.opts.batch))
		err = b.compareRounds(ctx, rep, title, []caseSpec{redisCase, dbCase, off, batched, dbBatched}, []pairing{
			{title + ": redis vs off", 0, 2},
			{title + ": database vs off", 1, 2},
			{title + ": redis vs database", 0, 1},
			{title + ": redis batched vs off", 3, 2},
			{title + ": database batched vs off", 4, 2},
		})
	}
	if err != nil {
		return err
	}
	_, err = b.restart(ctx, m)
	return err
}

// restartedReplay is the replay on the main database's server started
// afresh with env for each of its rounds; redisPid is the Redis whose CPU
// the case measures (0: none).
func (b *bench) restartedReplay(m *mainDB, name string, redisPid int, env ...string) caseSpec {
	return caseSpec{name: name, prepare: func(ctx context.Context) (loadRun, func() error, error) {
		p, err := b.restart(ctx, m, env...)
		if err != nil {
			return loadRun{}, nil, err
		}
		return loadRun{conns: b.opts.conns, pid: p.pid(), redisPid: redisPid, next: m.replay(p.url)}, func() error { return nil }, nil
	}}
}

// gcCases compares the replay of serve with its own collector target
// (GOGC unset: serve's 400) and with Go's default (GOGC=100), each server
// started afresh for its round.
func (b *bench) gcCases(ctx context.Context, rep *dbReport, m *mainDB) error {
	err := b.compare(ctx, rep, cmpGC+" (replay)", b.restartedReplay(m, "GOGC unset (serve's 400)", 0),
		b.restartedReplay(m, "GOGC=100 (Go's default)", 0, "GOGC=100"))
	if err != nil {
		return err
	}
	_, err = b.restart(ctx, m)
	return err
}

// cacheCases compares the replay with the replay cache on (its default,
// IDEMPOTENCY_REPLAY_CACHE unset) and off (0: every replay reads its record
// with its token row), each server started afresh for its round.
func (b *bench) cacheCases(ctx context.Context, rep *dbReport, m *mainDB) error {
	err := b.compare(ctx, rep, cmpCache+" (replay)", b.restartedReplay(m, "replay cache on (the default)", 0),
		b.restartedReplay(m, "replay cache off (IDEMPOTENCY_REPLAY_CACHE=0)", 0, "IDEMPOTENCY_REPLAY_CACHE=0"))
	if err != nil {
		return err
	}
	_, err = b.restart(ctx, m)
	return err
}

// peerKind is one of the peers: the subcommand that serves it and its
// name in the report and the logs.
type peerKind struct{ command, name string }

var (
	fiberPeer = peerKind{command: peerCommand, name: "fiber"}
	echoPeer  = peerKind{command: echoPeerCommand, name: "echo-peer"}
)

// peerServer is a peer on the main database's kind of database.
type peerServer struct {
	b     *bench
	kind  peerKind
	t     *dbTarget
	env   []string
	proc  *process
	token string // <id>|<secret>
	key   string
	body  []byte
}

func (p *peerServer) current() *process { return p.proc }

func (p *peerServer) replay(url string) requestFunc {
	return fixedPost(url+"/api/licenses", p.token, p.key, p.body)
}

// restart replaces the peer process with a fresh one.
func (p *peerServer) restart(ctx context.Context) (*process, error) {
	if err := p.b.stopProcess(p.proc); err != nil {
		return nil, err
	}
	proc, err := p.b.start(ctx, p.kind.name+"-"+p.t.name, p.b.self, []string{p.kind.command}, p.env)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	return proc, nil
}

// startPeer starts a peer: on MariaDB in licensor's scratch database (the
// two peers' token ids differ; their answers share a table, under keys
// each makes afresh), on SQLite in a file of its own (one writer per file,
// as licensor has), and makes the create its replay case repeats.
func (b *bench) startPeer(ctx context.Context, m *mainDB, kind peerKind) (*peerServer, error) {
	t := m.t
	if t.dialect == dialectSQLite {
		var err error
		if t, err = b.newTarget(ctx, dialectSQLite, kind.name); err != nil {
			return nil, err
		}
	}
	id, secret := randomHex(8), randomHex(20)
	p := &peerServer{b: b, kind: kind, t: t, token: id + "|" + secret, key: newKey()}
	p.env = append(b.licensorEnv(t),
		envPeerTokenID+"="+id, envPeerSecret+"="+secret,
		envPeerBodySize+"="+strconv.Itoa(len(m.license.Body)))
	proc, err := b.start(ctx, kind.name+"-"+t.name, b.self, []string{kind.command}, p.env)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	domain := nextDomain()
	p.body = licenseBody("Bench", domain)
	first, err := create(ctx, proc.url, p.token, p.key, domain)
	if err != nil {
		return p, err
	}
	again, err := create(ctx, proc.url, p.token, p.key, domain)
	if err != nil {
		return p, err
	}
	if first.Status != http.StatusCreated || again.Status != http.StatusCreated || string(first.Body) != string(again.Body) {
		return p, fmt.Errorf("the %s replay setup: first %d, repeat %d, same body %v", kind.name, first.Status, again.Status, string(first.Body) == string(again.Body))
	}
	if len(first.Body) != len(m.license.Body) {
		fmt.Fprintf(os.Stderr, "note: %s body %d bytes, licensor's %d\n", kind.name, len(first.Body), len(m.license.Body))
	}
	return p, nil
}

// consumerID is the id of the consumer named name.
func consumerID(ctx context.Context, db *sql.DB, name string) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, "SELECT id FROM consumers WHERE name = ?", name).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("consumer %s: %w", name, err)
	}
	return id, nil
}
