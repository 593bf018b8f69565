package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// The world's fixed parts: two processes, two consumers, three domains.
const (
	procs         = 2
	webhookSecret = "whsec_sim"
	issuer        = "http://licensor.sim"
	operator      = "ops" // the operator, whose token manages intents
)

var (
	consumers = []string{"alpha", "beta"}
	domains   = []string{"a.test", "b.test", "c.test"}
	appKey    = []byte("0123456789abcdef0123456789abcdef")
	// epoch is where a bubble's clock starts (testing/synctest).
	epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// simConfig is every process's configuration.
func simConfig(path string) config.Config {
	return config.Config{
		Env: config.EnvTesting, Key: appKey, URL: issuer, Issuer: issuer, MaxBody: 64 << 10,
		TokenTTL: 24 * 365 * time.Hour, TokenMaxTTL: 24 * 365 * time.Hour,
		DB: config.DB{Connection: database.SQLite, Database: path, MaxOpenConns: 1, MaxIdleConns: 1,
			QueryTimeout: 30 * time.Second, ReadConns: 1},
		Vendor:              config.Vendor{Driver: "http", URL: "http://vendor.invalid", WebhookSecrets: []string{webhookSecret}},
		Idempotency:         config.Idempotency{TTL: 24 * time.Hour, LockTimeout: time.Minute, ReplayCache: 1024},
		Reconcile:           config.Reconcile{Interval: 15 * time.Second, Settle: 30 * time.Second, MaxAttempts: 10},
		PruneEvery:          time.Hour,
		EventsTTL:           30 * 24 * time.Hour,
		ConsumerConcurrency: 100,
		LogLevel:            "error",
		Console:             config.Console{Disabled: true},
		Webhooks: config.Webhooks{Timeout: 10 * time.Second, RetryBase: 30 * time.Second, RetryFor: 72 * time.Hour,
			PollInterval: time.Second, EndpointConcurrency: 2, AllowPrivate: true},
	}
}

// template is the migrated database whose rows every case starts from
// (slots_test.go), with a token per consumer (issued at the bubble's
// epoch).
type template struct {
	path   string
	tokens map[string]string // consumer → bearer token
}

var (
	tmplOnce sync.Once
	tmpl     template
	tmplErr  error
	tmplDir  string
)

// theTemplate migrates the template once per test binary.
func theTemplate(t testing.TB) template {
	tmplOnce.Do(func() {
		// In memory where the machine has a tmpfs: the slots' files are
		// written to on every case.
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
		tmplDir, tmplErr = os.MkdirTemp(base, "licensor-sim-")
		if tmplErr != nil {
			return
		}
		tmpl, tmplErr = makeTemplate(filepath.Join(tmplDir, "template.sqlite"))
	})
	if tmplErr != nil {
		t.Fatalf("template database: %v", tmplErr)
	}
	return tmpl
}

// makeTemplate migrates the template at path and issues its tokens.
func makeTemplate(path string) (template, error) {
	ctx := context.Background()
	cfg := simConfig(path)
	db, err := database.OpenMigrated(ctx, cfg.DB, discard())
	if err != nil {
		return template{}, err
	}
	a, err := console.Bootstrap(ctx, cfg, discard(), console.Overrides{DB: db, Vendor: newVendor(nil).as(0, nil),
		Now: func() time.Time { return epoch.Add(-time.Minute) }})
	if err != nil {
		return template{}, err
	}
	out := template{path: path, tokens: map[string]string{}}
	for _, c := range consumers {
		tok, err := a.Auth.Issue(ctx, audit.Console(), auth.IssueInput{Consumer: c, Abilities: auth.ConsumerAbilities})
		if err != nil {
			return template{}, err
		}
		out.tokens[c] = tok.Secret
	}
	tok, err := a.Auth.Issue(ctx, audit.Console(), auth.IssueInput{Consumer: operator, Abilities: []string{auth.IntentsManage}})
	if err != nil {
		return template{}, err
	}
	out.tokens[operator] = tok.Secret
	for _, c := range consumers { // each consumer's webhook endpoint, for every license event
		var id string
		if err := db.Raw("SELECT id FROM consumers WHERE name = ?", c).Scan(&id).Error; err != nil {
			return template{}, err
		}
		if _, _, err := a.Webhooks.CreateEndpoint(ctx, id, webhooks.EndpointInput{URL: hookURL(c)}); err != nil {
			return template{}, fmt.Errorf("the endpoint of %s: %w", c, err)
		}
	}
	if err := a.Close(); err != nil {
		return template{}, err
	}
	if err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
		return template{}, err
	}
	return out, database.Close(db)
}

// discard is a logger that writes nothing.
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// removeDB removes a case's database file and its WAL files.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
}

// process is one running licensor: its pools on the shared file, its
// application and its HTTP handler. A crash cancels ctx and closes the
// pools, so that nothing of it lands afterwards.
type process struct {
	id     int
	db     *gorm.DB
	read   *gorm.DB
	app    *console.App
	server http.Handler
	ctx    context.Context
	cancel context.CancelFunc
}

// start builds process id on the file, as `licensor serve` does, its
// connections opened through the driver named (empty: licensor's own).
func start(id int, path, driver string, v *vendor, hooks http.RoundTripper) (*process, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := simConfig(path)
	cfg.DB.SQLiteDriver = driver // the slot's (slots_test.go)
	db, err := database.Open(ctx, cfg.DB)
	if err != nil {
		cancel()
		return nil, err
	}
	read, err := database.OpenReader(ctx, cfg.DB, db)
	if err != nil {
		cancel()
		return nil, err
	}
	a, err := console.Bootstrap(ctx, cfg, discard(), console.Overrides{DB: db, Read: read, Vendor: v.as(id, ctx.Done()), Now: time.Now,
		Jitter:           func(time.Duration) time.Duration { return 0 }, // the schedule's alone: a seed replays
		WebhookTransport: hooks})
	if err != nil {
		cancel()
		return nil, err
	}
	return &process{id: id, db: db, read: read, app: a, server: a.Server(), ctx: ctx, cancel: cancel}, nil
}

// closePools ends the process's database: no statement of it lands after.
func (p *process) closePools() {
	p.cancel()
	_ = database.Close(p.db)
	if p.read != p.db {
		_ = database.Close(p.read)
	}
}

// stop closes the application (its flushes fail on closed pools after a
// crash: nothing of them lands).
func (p *process) stop() {
	_ = p.app.Close()
}

// answer is an HTTP answer as a client saw it.
type answer struct {
	Status   int
	Replayed bool
	Body     string
}

// stepKey is the context key of the step whose request a context serves:
// the vendor notes which step made a site.
type stepKey struct{}

// do sends a request through the process's handler.
func (p *process) do(method, path, body string, headers ...string) answer {
	return p.doAt(-1, method, path, body, headers...)
}

// doAt sends the request of a step through the process's handler.
func (p *process) doAt(step int, method, path, body string, headers ...string) answer {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r).WithContext(context.WithValue(p.ctx, stepKey{}, step))
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	p.server.ServeHTTP(rec, req)
	return answer{Status: rec.Code, Replayed: rec.Header().Get("Idempotent-Replayed") == "true", Body: strings.TrimSpace(rec.Body.String())}
}
