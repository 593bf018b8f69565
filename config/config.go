// Package config loads licensor's typed configuration from the environment.
//
// It is the only package that reads environment variables, and it reads them
// once, at start-up, through the getenv function that main hands it. A value
// that cannot be parsed stops start-up with an error that names the variable.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Environments licensor knows.
const (
	EnvLocal      = "local"
	EnvTesting    = "testing"
	EnvProduction = "production"
)

// minWebhookSecret is the shortest VENDOR_WEBHOOK_SECRET production takes:
// 32 bytes, as long as the HMAC-SHA256 it keys.
const minWebhookSecret = 32

// Config is every setting licensor reads, already parsed and validated.
type Config struct {
	Env          string
	Key          []byte   // the 32 bytes APP_KEY decodes to; signs tokens, encrypts secrets at rest
	KeySource    string   // where Key came from: "env", "file" or "ephemeral"
	PreviousKeys [][]byte // APP_PREVIOUS_KEYS: older keys that still decrypt what they sealed
	URL          string   // APP_URL, the base of the API's links; unset outside production: URLOf(Addr)
	// Issuer is the tokens' issuer: APP_URL, else DefaultURL, one value
	// whatever APP_ADDR each process has (a one-off `token issue`).
	Issuer          string
	Addr            string
	MetricsAddr     string // when set, /metrics is served there instead of on Addr (see MetricsOnAPI)
	PprofAddr       string // when set, Go's profiles are served there: a loopback or private address only
	MaxBody         int64
	ShutdownTimeout time.Duration
	ReadTimeout     time.Duration // reading a whole request, body included
	// WriteTimeout bounds a request from its headers to the end of its
	// response; 0 derives it from ReadTimeout and the idempotency lease, so
	// that a create always has its full work budget.
	WriteTimeout time.Duration
	IdleTimeout  time.Duration // how long a kept-alive connection waits for its next request
	StorageDir   string

	DB          DB
	Vendor      Vendor
	Idempotency Idempotency
	Reconcile   Reconcile
	Webhooks    Webhooks
	EventsTTL   time.Duration // how far back the events feed reads; older events are pruned
	PruneEvery  time.Duration
	DriftEvery  time.Duration // how often serve compares the vendor's sites with the licenses; 0: never
	// DriftMaxFix is the most licenses one `drift --fix` revokes or re-keys;
	// above it the fix applies nothing without --force.
	DriftMaxFix        int
	TokenTTL           time.Duration
	TokenMaxTTL        time.Duration // the longest lifetime a token may be issued with; TokenTTL is at most this
	RateLimitPerMinute int           // per consumer; 0 turns rate limiting off
	// RateLimitStore is where the counts live: "memory" (this process),
	// "database" or "redis" (shared by the replicas on it). Empty, as a
	// hand-made Config may leave it: DefaultRateLimitStore.
	RateLimitStore string
	RedisURL       string // redis://, rediss:// or unix://: the redis store's, unused by the others
	// RateLimitBatch is how many requests of a consumer the shared stores
	// count in one round trip (1: exact). More: fewer round trips, the limit
	// never exceeded, the 429s up to replicas·(batch−1) requests early.
	RateLimitBatch int
	RedisTimeout   time.Duration // bounds one count in Redis; past it this replica counts alone
	// RateLimitFallbackShare is the share of RateLimitPerMinute a replica
	// allows a consumer, counting alone, while the shared store cannot count.
	RateLimitFallbackShare float64
	// ConsumerConcurrency is how many writes of one consumer a replica serves
	// at once; the next is refused with 429 concurrency_limited. 0: off.
	ConsumerConcurrency int
	Console             Console
	CORSAllowedOrigins  []string // the origins browsers may call api/* from; "*": any
	// TrustedProxies are the proxies whose X-Forwarded-For (or X-Real-IP)
	// names a request's client; none: the connection's peer. The one rule
	// for every client address: the access log's and the sign-in limit's.
	TrustedProxies []netip.Prefix

	LogLevel  string
	LogFormat string
}

// DB configures the database connection.
type DB struct {
	Connection   string // "sqlite" or "mysql"
	Database     string // SQLite file, or MySQL database name
	Host         string
	Port         int
	Username     string
	Password     string
	URL          string // a full DSN; overrides the fields above when set
	MaxOpenConns int
	MaxIdleConns int
	ReadConns    int // SQLite's read-only pool; 0: one per CPU, at least two. MySQL has one pool
	// QueryTimeout bounds every statement, so a frozen database fails a
	// request fast (503) instead of hanging it. On SQLite it is also the
	// busy timeout (at most 10 s): how long a write waits for the lock
	// another connection or process holds.
	QueryTimeout time.Duration
	// SQLiteDriver is the database/sql driver SQLite connections open
	// through; empty (always, outside tests) is licensor's own. It is not
	// read from the environment: a test registers a driver that wraps
	// database.SQLiteDriver (the simulation keeps connections warm across
	// its cases with one).
	SQLiteDriver string
}

// Vendor configures the upstream license vendor driver.
type Vendor struct {
	Driver        string // "fake" or "http"
	URL           string
	Token         string
	Timeout       time.Duration
	RetryAttempts int
	RetryBase     time.Duration
	RetryMaxWait  time.Duration
	AllowFake     bool // lets production run the in-memory fake driver, for demos
	// WebhookSecrets verify the vendor's webhooks: the new secret and the old
	// one during a rotation. None: every webhook is refused.
	WebhookSecrets []string
}

// Idempotency configures the Idempotency-Key layer.
type Idempotency struct {
	TTL         time.Duration
	LockTimeout time.Duration
	Required    bool
	// ReplayCache is how many completed records each replica keeps in
	// memory for replays (0: none).
	ReplayCache int
}

// Webhooks configures the delivery of consumer events to the consumers'
// webhook endpoints.
type Webhooks struct {
	Timeout   time.Duration // one attempt, connection to answer: a 2xx within it is delivered
	RetryBase time.Duration // the first wait after a failed attempt, doubling, with jitter
	// RetryFor is how long a delivery is retried before it is failed, and how
	// long an endpoint may fail every delivery before it is disabled.
	RetryFor time.Duration
	// AllowPrivate lets endpoints resolve to loopback, private and link-local
	// addresses: off by default in every environment (a staging server is as
	// reachable as a production one), refused in production.
	AllowPrivate bool
	// PrivateAllowlist are the private ranges endpoints may reach all the
	// same; every other non-public address stays refused.
	PrivateAllowlist    []netip.Prefix
	RequireHTTPS        bool          // refuses endpoint URLs that are not https: production
	PollInterval        time.Duration // how often each replica looks for events and due deliveries
	EndpointConcurrency int           // attempts in flight to one endpoint at once, across replicas
}

// Reconcile configures the loop that settles pending intents.
type Reconcile struct {
	Interval    time.Duration
	Settle      time.Duration
	MaxAttempts int
	FailedEvery time.Duration // how long a failed intent waits before it is tried again
}

// Load reads the configuration (Read), then, in local, makes the key file
// if it is not there yet (CreateKey).
func Load(getenv func(string) string) (Config, error) {
	c, err := Read(getenv)
	if err != nil {
		return Config{}, err
	}
	if err := c.CreateKey(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Read reads the configuration, from getenv then .env, and creates nothing: in
// local without APP_KEY, a key file that is not there yet leaves Key nil, for
// CreateKey once a command knows its database is there.
func Read(getenv func(string) string) (Config, error) {
	get, err := WithDotenv(getenv)
	if err != nil {
		return Config{}, err
	}
	v := &values{get: get}
	c := v.load()
	c.PreviousKeys = v.keys("APP_PREVIOUS_KEYS")
	if c.Env == EnvProduction && v.str("APP_KEY", "") == "" {
		v.errs = append(v.errs, errProductionKey) // said with the others, not after they are fixed
	}
	if len(v.errs) > 0 {
		return Config{}, errors.Join(v.errs...)
	}
	if err := c.loadKey(v.str("APP_KEY", "")); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (v *values) load() Config {
	c := Config{
		Env:             v.oneOf("APP_ENV", EnvLocal, EnvLocal, EnvTesting, EnvProduction),
		Addr:            v.str("APP_ADDR", "127.0.0.1:8080"),
		MetricsAddr:     v.str("METRICS_ADDR", ""),
		PprofAddr:       v.str("PPROF_ADDR", ""),
		MaxBody:         v.size("APP_MAX_BODY", "64KB"),
		ShutdownTimeout: v.duration("APP_SHUTDOWN_TIMEOUT", "20s"),
		ReadTimeout:     v.duration("APP_READ_TIMEOUT", "15s"),
		WriteTimeout:    v.optionalDuration("APP_WRITE_TIMEOUT"),
		IdleTimeout:     v.duration("APP_IDLE_TIMEOUT", "120s"),
		StorageDir:      v.storage("APP_STORAGE", "storage"),
		PruneEvery:      v.duration("PRUNE_INTERVAL", "1h"),
		DriftEvery:      v.durationOrOff("DRIFT_INTERVAL", "6h"),
		DriftMaxFix:     v.intRange("DRIFT_MAX_FIX", 25, 0, 1_000_000_000),
		TokenTTL:        v.duration("TOKEN_TTL", "2160h"),
		TokenMaxTTL:     v.duration("TOKEN_MAX_TTL", "8760h"),
		LogLevel:        v.oneOf("LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		// 0 turns it off; the bound keeps a window's count in an INT UNSIGNED.
		RateLimitPerMinute: v.intRange("RATE_LIMIT_PER_MINUTE", 600, 0, 1_000_000_000),
	}
	c.URL = v.str("APP_URL", "")
	c.Issuer = c.URL
	if c.URL == "" {
		// Production names it. Elsewhere the links follow the address
		// served, and the tokens' issuer is one fixed default, so that
		// every process agrees on it whatever APP_ADDR each has.
		if c.Env == EnvProduction {
			v.fail("APP_URL", "is required in production: it is the tokens' issuer and the base of the API's links; "+
				"give every replica the same, e.g. https://licensor.example")
		} else {
			c.URL, c.Issuer = URLOf(c.Addr), DefaultURL
		}
	}
	if c.TokenTTL > 0 && c.TokenMaxTTL > 0 && c.TokenTTL > c.TokenMaxTTL {
		v.fail("TOKEN_TTL", "%v is longer than TOKEN_MAX_TTL (%v); tokens may not live that long", c.TokenTTL, c.TokenMaxTTL)
	}
	for _, o := range strings.Split(v.str("CORS_ALLOWED_ORIGINS", "*"), ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			c.CORSAllowedOrigins = append(c.CORSAllowedOrigins, o)
		}
	}
	if len(c.CORSAllowedOrigins) == 0 {
		c.CORSAllowedOrigins = []string{"*"}
	}
	c.TrustedProxies = v.trustedProxies("TRUSTED_PROXIES")
	logFormat := "json"
	if c.Env == EnvLocal {
		logFormat = "text"
	}
	c.LogFormat = v.oneOf("LOG_FORMAT", logFormat, "text", "json")
	c.DB = v.db(c.StorageDir)
	c.RateLimitStore, c.RedisURL = v.rateLimitStore(c.DB.Connection)
	c.RateLimitBatch = v.intRange("RATE_LIMIT_BATCH", 1, 1, 1000)
	c.RedisTimeout = v.duration("REDIS_TIMEOUT", "100ms")
	c.RateLimitFallbackShare = v.share("RATE_LIMIT_FALLBACK_SHARE", 1)
	c.ConsumerConcurrency = v.intRange("CONSUMER_CONCURRENCY", 20, 0, 1_000_000)
	c.Vendor = Vendor{
		Driver:        v.oneOf("VENDOR_DRIVER", "fake", "fake", "http"),
		URL:           v.str("VENDOR_URL", ""),
		Token:         v.str("VENDOR_TOKEN", ""),
		Timeout:       v.duration("VENDOR_TIMEOUT", "10s"),
		RetryAttempts: v.intRange("VENDOR_RETRY_ATTEMPTS", 3, 0, 100),
		RetryBase:     v.duration("VENDOR_RETRY_BASE", "500ms"),
		RetryMaxWait:  v.duration("VENDOR_RETRY_MAX_WAIT", "10s"),
		AllowFake:     v.boolean("VENDOR_ALLOW_FAKE", false),
	}
	for _, secret := range strings.Split(v.str("VENDOR_WEBHOOK_SECRET", ""), ",") {
		if secret = strings.TrimSpace(secret); secret != "" {
			c.Vendor.WebhookSecrets = append(c.Vendor.WebhookSecrets, secret)
			if c.Env == EnvProduction && len(secret) < minWebhookSecret {
				v.fail("VENDOR_WEBHOOK_SECRET", "a secret of %d bytes is refused in production: give each at least %d (e.g. openssl rand -hex 32)",
					len(secret), minWebhookSecret)
			}
		}
	}
	if c.Vendor.Driver == "http" {
		v.requireURL("VENDOR_URL", c.Vendor.URL)
		v.require("VENDOR_TOKEN", c.Vendor.Token)
	}
	if c.Env == EnvProduction && c.Vendor.Driver == "fake" && !c.Vendor.AllowFake {
		v.fail("VENDOR_DRIVER", "%q (the default) keeps sites in memory and is refused in production: "+
			"set VENDOR_DRIVER=http with VENDOR_URL and VENDOR_TOKEN, or VENDOR_ALLOW_FAKE=true for a demo", c.Vendor.Driver)
	}
	c.Idempotency = Idempotency{
		TTL:         v.duration("IDEMPOTENCY_TTL", "24h"),
		LockTimeout: v.duration("IDEMPOTENCY_LOCK_TIMEOUT", "60s"),
		Required:    v.boolean("IDEMPOTENCY_REQUIRED", false),
		ReplayCache: v.intRange("IDEMPOTENCY_REPLAY_CACHE", 1024, 0, 100_000),
	}
	c.EventsTTL = v.duration("EVENTS_TTL", "720h")
	c.Console = Console{
		Disabled:        !v.boolean("CONSOLE_ENABLED", true),
		SessionTTL:      v.duration("CONSOLE_SESSION_TTL", "8h"),
		LoginsPerMinute: v.intRange("CONSOLE_LOGINS_PER_MINUTE", 10, 1, 10_000),
		// A cookie marked Secure is not sent over plain http, which is how
		// `go run .` serves on 127.0.0.1.
		SecureCookie: c.Env != EnvLocal,
	}
	c.Webhooks = Webhooks{
		Timeout:      v.duration("WEBHOOK_TIMEOUT", "10s"),
		RetryBase:    v.duration("WEBHOOK_RETRY_BASE", "30s"),
		RetryFor:     v.duration("WEBHOOK_RETRY_FOR", "72h"),
		AllowPrivate: v.boolean("WEBHOOK_ALLOW_PRIVATE", false),
		RequireHTTPS: c.Env == EnvProduction,
		PollInterval: v.duration("WEBHOOK_POLL_INTERVAL", "1s"),
		// A range narrower than /8 names a network; a wider one (0.0.0.0/0)
		// would be WEBHOOK_ALLOW_PRIVATE under another name.
		PrivateAllowlist:    v.prefixes("WEBHOOK_PRIVATE_ALLOWLIST", 8),
		EndpointConcurrency: v.intRange("WEBHOOK_ENDPOINT_CONCURRENCY", 1, 1, 16),
	}
	if c.Env == EnvProduction && c.Webhooks.AllowPrivate {
		v.fail("WEBHOOK_ALLOW_PRIVATE", "true is refused in production: it lets consumers' webhooks reach loopback, private "+
			"and link-local addresses (the cloud's metadata service, internal ports). Remove it; to deliver into a private "+
			"network, name its ranges in WEBHOOK_PRIVATE_ALLOWLIST (e.g. 10.1.2.0/24,fd00:1::/64)")
	}
	c.Reconcile = Reconcile{
		Interval:    v.duration("RECONCILE_INTERVAL", "15s"),
		Settle:      v.duration("RECONCILE_SETTLE", "60s"),
		MaxAttempts: v.intRange("RECONCILE_MAX_ATTEMPTS", 10, 1, 1000),
		FailedEvery: v.duration("RECONCILE_FAILED_INTERVAL", "1h"),
	}
	return c
}

func (v *values) db(storage string) DB {
	conn := v.connection()
	d := DB{
		Connection: conn,
		Host:       v.str("DB_HOST", "127.0.0.1"),
		Port:       v.intRange("DB_PORT", 3306, 1, 65535),
		Username:   v.str("DB_USERNAME", "root"),
		Password:   v.str("DB_PASSWORD", ""),
		URL:        v.str("DB_URL", ""),
	}
	// SQLite serialises writers anyway; one writing connection means no
	// SQLITE_BUSY under contention, and reads have a pool of their own
	// (DB_READ_CONNS). MySQL gets one pool sized for a small replica.
	openDefault, idleDefault := 1, 1
	d.Database = v.str("DB_DATABASE", storage+"/database.sqlite")
	if conn == "mysql" {
		openDefault, idleDefault = 20, 10
		d.Database = v.str("DB_DATABASE", "licensor")
	}
	d.MaxOpenConns = v.intRange("DB_MAX_OPEN_CONNS", openDefault, 1, 10000)
	d.MaxIdleConns = v.intRange("DB_MAX_IDLE_CONNS", idleDefault, 0, 10000)
	d.ReadConns = v.intRange("DB_READ_CONNS", 0, 0, 10000)
	d.QueryTimeout = v.duration("DB_QUERY_TIMEOUT", "5s")
	return d
}

// connection is DB_CONNECTION, which DB_URL implies: a MySQL DSN
// (user:pass@tcp(host:3306)/db) or a mysql:// URL is MySQL, so that a DB_URL
// is never silently ignored while SQLite serves. Any other DB_URL, and
// DB_URL beside an explicit DB_CONNECTION=sqlite, is refused.
func (v *values) connection() string {
	explicit := v.str("DB_CONNECTION", "")
	conn := v.oneOf("DB_CONNECTION", "sqlite", "sqlite", "mysql")
	dbURL := v.str("DB_URL", "")
	switch {
	case dbURL == "":
		return conn
	case !IsMySQLURL(dbURL):
		// The value is not repeated: it may hold a password.
		v.fail("DB_URL", "is neither a MySQL DSN (user:pass@tcp(host:3306)/licensor) nor a mysql:// URL "+
			"(mysql://user:pass@host:3306/licensor); for SQLite, unset DB_URL and name the file in DB_DATABASE")
	case explicit == "sqlite":
		v.fail("DB_URL", "is set, and DB_CONNECTION=sqlite: DB_URL names a MySQL database; "+
			"unset DB_URL to serve SQLite, or DB_CONNECTION (or set it to mysql) to serve the MySQL DB_URL names")
	}
	return "mysql"
}

// mysqlDSN matches go-sql-driver's DSN, [user[:pass]@]net(addr)/dbname[?params].
var mysqlDSN = regexp.MustCompile(`^(.*@)?(tcp|tcp4|tcp6|unix)\([^)]*\)/.*$`)

// IsMySQLURL tells whether DB_URL's value names a MySQL database: a
// go-sql-driver DSN or a mysql:// URL.
func IsMySQLURL(s string) bool {
	return strings.HasPrefix(s, "mysql://") || mysqlDSN.MatchString(s)
}

// Rate limit stores (RATE_LIMIT_STORE).
const (
	RateLimitMemory   = "memory"
	RateLimitDatabase = "database"
	RateLimitRedis    = "redis"
)

// DefaultRateLimitStore is RATE_LIMIT_STORE's default: Redis when one is
// configured (REDIS_URL serves nothing else); else the database on MySQL,
// which several replicas share, memory on SQLite, which one process serves.
func DefaultRateLimitStore(conn, redisURL string) string {
	switch {
	case redisURL != "":
		return RateLimitRedis
	case conn == "mysql":
		return RateLimitDatabase
	}
	return RateLimitMemory
}

func (v *values) rateLimitStore(conn string) (store, redisURL string) {
	redisURL = v.str("REDIS_URL", "")
	store = v.oneOf("RATE_LIMIT_STORE", DefaultRateLimitStore(conn, redisURL), RateLimitMemory, RateLimitDatabase, RateLimitRedis)
	switch {
	case redisURL != "":
		v.redisURL("REDIS_URL", redisURL)
	case store == RateLimitRedis:
		v.fail("REDIS_URL", "is required by RATE_LIMIT_STORE=redis, e.g. redis://127.0.0.1:6379/0")
	}
	return store, redisURL
}

// Redacted describes the database for a log line, without the password.
func (d DB) Redacted() string {
	if d.Connection == "sqlite" {
		return "sqlite " + d.Database
	}
	if d.URL != "" {
		return "mysql " + redactDSN(d.URL)
	}
	return fmt.Sprintf("mysql %s@%s:%d/%s", d.Username, d.Host, d.Port, d.Database)
}

// RedactRedisURL is a Redis URL for a log line or an error: its password
// replaced by "xxxxx", and anything that is not a URL by a placeholder.
func RedactRedisURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

func redactDSN(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	user, _, _ := strings.Cut(dsn[:at], ":")
	if u, err := url.PathUnescape(user); err == nil {
		user = u
	}
	return user + "@" + dsn[at+1:]
}

// Console is the operator console's configuration.
type Console struct {
	Disabled        bool          // CONSOLE_ENABLED=false; the zero value serves it
	SessionTTL      time.Duration // a session also ends when its token expires or is revoked
	LoginsPerMinute int           // failed sign-ins a client address, and a token tried, may make
	SecureCookie    bool          // everywhere but local
}
