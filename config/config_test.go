package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testKey is an APP_KEY Load accepts.
const testKey = "base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// A configuration Load refuses names every variable at fault, all at once.
func TestRefusalsNameTheVariables(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		env   map[string]string
		names []string
	}{
		{map[string]string{"APP_ENV": "staging", "APP_MAX_BODY": "lots", "IDEMPOTENCY_TTL": "-1h", "VENDOR_RETRY_ATTEMPTS": "many",
			"DB_CONNECTION": "postgres", "IDEMPOTENCY_REQUIRED": "maybe"},
			[]string{"APP_ENV", "APP_MAX_BODY", "IDEMPOTENCY_TTL", "VENDOR_RETRY_ATTEMPTS", "DB_CONNECTION", "IDEMPOTENCY_REQUIRED"}},
		{map[string]string{"VENDOR_DRIVER": "http", "VENDOR_URL": "ftp://x"}, []string{"VENDOR_URL", "VENDOR_TOKEN"}},
		{map[string]string{"APP_KEY": "secret"}, []string{"APP_KEY"}},
		{map[string]string{"APP_KEY": "base64:c2hvcnQ="}, []string{"APP_KEY"}},
		{map[string]string{"APP_KEY": "base64:!!!"}, []string{"APP_KEY"}},
		{prodEnv(map[string]string{"APP_URL": ""}), []string{"APP_URL"}},
		{prodEnv(map[string]string{"APP_URL": "", "APP_KEY": ""}), []string{"APP_URL", "APP_KEY"}},
		{prodEnv(map[string]string{"VENDOR_ALLOW_FAKE": "maybe"}), []string{"VENDOR_ALLOW_FAKE"}},
		{prodEnv(map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true"}), []string{"WEBHOOK_ALLOW_PRIVATE", "WEBHOOK_PRIVATE_ALLOWLIST"}},
		{map[string]string{"RATE_LIMIT_STORE": "redis"}, []string{"REDIS_URL", "RATE_LIMIT_STORE=redis"}},
		{map[string]string{"RATE_LIMIT_STORE": "cache"}, []string{"RATE_LIMIT_STORE"}},
		{map[string]string{"CONSOLE_LOGINS_PER_MINUTE": "0"}, []string{"CONSOLE_LOGINS_PER_MINUTE"}},
	} {
		_, err := Load(envOf(tc.env))
		for _, name := range tc.names {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%v: err = %v, want %s named", tc.env, err, name)
			}
		}
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Load(envOf(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Env != EnvLocal || c.Addr != "127.0.0.1:8080" || c.MaxBody != 64<<10 {
		t.Errorf("got env=%q addr=%q maxBody=%d", c.Env, c.Addr, c.MaxBody)
	}
	if c.DB.Connection != "sqlite" || c.DB.Database != "storage/database.sqlite" || c.DB.MaxOpenConns != 1 {
		t.Errorf("got db %+v", c.DB)
	}
	if c.Vendor.Driver != "fake" || c.Vendor.RetryAttempts != 3 || c.Vendor.RetryBase != 500*time.Millisecond {
		t.Errorf("got vendor %+v", c.Vendor)
	}
	if c.Idempotency.TTL != 24*time.Hour || c.Idempotency.LockTimeout != time.Minute || c.Idempotency.Required {
		t.Errorf("got idempotency %+v", c.Idempotency)
	}
	if c.LogFormat != "text" {
		t.Errorf("LogFormat = %q, want text in local", c.LogFormat)
	}
	w := c.Webhooks
	if w.Timeout != 10*time.Second || w.RetryBase != 30*time.Second || w.RetryFor != 72*time.Hour || w.PollInterval != time.Second ||
		w.AllowPrivate || w.RequireHTTPS || c.EventsTTL != 720*time.Hour {
		t.Errorf("got webhooks %+v, events TTL %v; want private addresses refused by default, even in local", w, c.EventsTTL)
	}
	c, err = Load(envOf(map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true"}))
	if err != nil || !c.Webhooks.AllowPrivate {
		t.Errorf("WEBHOOK_ALLOW_PRIVATE=true: %+v, %v", c.Webhooks, err)
	}
}

func TestProductionRefusesToStartWithoutKey(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := Load(envOf(map[string]string{"APP_ENV": "production", "VENDOR_ALLOW_FAKE": "true"}))
	if err == nil || !strings.Contains(err.Error(), "APP_KEY") {
		t.Fatalf("err = %v, want APP_KEY named", err)
	}
	if _, statErr := os.Stat(filepath.Join("storage", keyFile)); !os.IsNotExist(statErr) {
		t.Errorf("production wrote a key file: %v", statErr)
	}
}

// Production refuses the in-memory fake vendor (the default driver) unless
// VENDOR_ALLOW_FAKE=true says it is a demo; the refusal names both variables.
func TestProductionRefusesFakeVendor(t *testing.T) {
	if example, err := os.ReadFile(filepath.Join("..", ".env.example")); err != nil || !strings.Contains(string(example), "\nVENDOR_ALLOW_FAKE=false\n") {
		t.Errorf(".env.example lacks VENDOR_ALLOW_FAKE=false (%v)", err)
	}
	t.Chdir(t.TempDir())
	for _, vars := range []map[string]string{prodEnv(map[string]string{"VENDOR_ALLOW_FAKE": ""}),
		prodEnv(map[string]string{"VENDOR_ALLOW_FAKE": "", "VENDOR_DRIVER": "fake"}), prodEnv(map[string]string{"VENDOR_ALLOW_FAKE": "false"})} {
		_, err := Load(envOf(vars))
		if err == nil || !strings.Contains(err.Error(), "VENDOR_DRIVER") || !strings.Contains(err.Error(), "VENDOR_ALLOW_FAKE") {
			t.Errorf("%v: err = %v, want VENDOR_DRIVER and VENDOR_ALLOW_FAKE named", vars, err)
		}
	}
	c, err := Load(envOf(prodEnv(nil)))
	if err != nil || c.Vendor.Driver != "fake" || !c.Vendor.AllowFake {
		t.Errorf("VENDOR_ALLOW_FAKE=true: driver %q, allow %v, err %v; want the fake allowed", c.Vendor.Driver, c.Vendor.AllowFake, err)
	}
	httpVendor := prodEnv(map[string]string{"VENDOR_ALLOW_FAKE": "", "VENDOR_DRIVER": "http", "VENDOR_URL": "https://vendor.test", "VENDOR_TOKEN": "t"})
	if _, err := Load(envOf(httpVendor)); err != nil {
		t.Errorf("production with the http driver: %v", err)
	}
	for _, env := range []string{"local", "testing"} {
		if c, err := Load(envOf(map[string]string{"APP_ENV": env, "APP_KEY": testKey})); err != nil || c.Vendor.AllowFake {
			t.Errorf("APP_ENV=%s with the fake: allow %v, err %v; want it accepted, VENDOR_ALLOW_FAKE false by default", env, c.Vendor.AllowFake, err)
		}
	}
}

func TestLocalGeneratesKeyOnceWithMode0600(t *testing.T) {
	t.Chdir(t.TempDir())
	first, err := Load(envOf(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	info, err := os.Stat(filepath.Join("storage", keyFile))
	if err != nil {
		t.Fatalf("key file: %v", err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %o, want 600", got)
	}
	second, err := Load(envOf(nil))
	if err != nil {
		t.Fatalf("second Load: %v", err)
	}
	if len(first.Key) != 32 || string(first.Key) != string(second.Key) {
		t.Errorf("key not reused across loads (len %d)", len(first.Key))
	}
	if first.KeySource != "file" {
		t.Errorf("KeySource = %q, want file", first.KeySource)
	}
}

func TestEnvironmentWinsOverDotenv(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile(".env", []byte("APP_ADDR=0.0.0.0:9000\nLOG_LEVEL=debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(envOf(map[string]string{"APP_ADDR": "127.0.0.1:7000"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Addr != "127.0.0.1:7000" || c.LogLevel != "debug" {
		t.Errorf("got addr=%q level=%q, want the environment's addr and the .env's level", c.Addr, c.LogLevel)
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{{"65536", 65536}, {"64KB", 65536}, {"64kib", 65536}, {"1MB", 1 << 20}, {"2M", 2 << 20}}
	for _, tt := range tests {
		v := &values{get: envOf(map[string]string{"X": tt.in})}
		if got := v.size("X", "1"); got != tt.want || len(v.errs) > 0 {
			t.Errorf("size(%q) = %d (errs %v), want %d", tt.in, got, v.errs, tt.want)
		}
	}
}

func TestRedactedHidesPassword(t *testing.T) {
	d := DB{Connection: "mysql", URL: "app:s3cret@tcp(db:3306)/licensor?parseTime=true"}
	if got := d.Redacted(); strings.Contains(got, "s3cret") || !strings.Contains(got, "app@tcp(db:3306)/licensor") {
		t.Errorf("Redacted() = %q", got)
	}
	d = DB{Connection: "mysql", Username: "app", Password: "s3cret", Host: "db", Port: 3306, Database: "licensor"}
	if got := d.Redacted(); strings.Contains(got, "s3cret") {
		t.Errorf("Redacted() = %q", got)
	}
}

func TestParseDotenv(t *testing.T) {
	src := "# comment\n\nAPP_ENV=production\nexport APP_ADDR = 0.0.0.0:8080 # listen\nDB_PASSWORD='p#ss \"x\"'\nAPP_URL=\"http://a.test/\\\"q\\\"\"\nEMPTY=\n"
	got, err := parseDotenv([]byte(src), ".env")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"APP_ENV": "production", "APP_ADDR": "0.0.0.0:8080", "DB_PASSWORD": `p#ss "x"`, "APP_URL": `http://a.test/"q"`, "EMPTY": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"NOEQUALS\n", "A='open\n", "=x\n"} {
		if _, err := parseDotenv([]byte(bad), ".env"); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseDotenv(%q) = %v, want an error naming the line", bad, err)
		}
	}
}

// Eight processes starting at once on a fresh checkout agree on one key,
// and none fails or reads a half-written file.
func TestConcurrentFirstStartsAgreeOnOneKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "storage", keyFile)
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range keys {
		wg.Go(func() { <-start; keys[i], errs[i] = localKey(path) })
	}
	close(start)
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || string(keys[i]) != string(keys[0]) || len(keys[i]) != 32 {
			t.Fatalf("start %d: key %x, err %v; want the same 32-byte key everywhere", i, keys[i], errs[i])
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("storage holds %d files, want only app.key (no temporary files left)", len(entries))
	}
}

func TestKeyFileProblemsNameTheFile(t *testing.T) {
	t.Chdir(t.TempDir())
	path := filepath.Join("storage", keyFile)
	if err := os.MkdirAll("storage", 0o700); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"empty":             {"", 0o600, "delete it"},
		"corrupt":           {"base64:nope", 0o600, "delete it"},
		"readable by other": {EncodeKey(NewKey()), 0o644, "chmod 600"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Load(envOf(nil))
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to name %s and say %q", err, path, tc.want)
			}
		})
	}
}

func TestDotenvWithByteOrderMark(t *testing.T) {
	got, err := parseDotenv([]byte("\xef\xbb\xbfAPP_KEY=base64:x\n"), ".env")
	if err != nil || got["APP_KEY"] != "base64:x" {
		t.Errorf("got %q, %v; want APP_KEY read despite the BOM", got, err)
	}
	if _, err := parseDotenv([]byte("1BAD=x\n"), ".env"); err == nil {
		t.Error("a name starting with a digit was accepted")
	}
}

// DRIFT_INTERVAL: 6h by default, "0" turns the check off, anything else
// must be a positive duration; VENDOR_WEBHOOK_SECRET takes a list.
// VENDOR_WEBHOOK_SECRET is a comma list: none by default, entries trimmed
// and empty ones skipped.
func TestVendorWebhookSecrets(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Load(envOf(nil))
	if err != nil || len(c.Vendor.WebhookSecrets) != 0 {
		t.Fatalf("default: secrets %v, %v", c.Vendor.WebhookSecrets, err)
	}
	c, err = Load(envOf(map[string]string{"VENDOR_WEBHOOK_SECRET": " new , old ,"}))
	if err != nil || !slices.Equal(c.Vendor.WebhookSecrets, []string{"new", "old"}) {
		t.Fatalf("secrets %q, %v", c.Vendor.WebhookSecrets, err)
	}
}

// Production refuses a VENDOR_WEBHOOK_SECRET shorter than 32 bytes (any one
// of a rotation's), naming the variable but not the secret; elsewhere a
// short one is taken, for local work and tests.
func TestProductionRefusesAShortWebhookSecret(t *testing.T) {
	t.Chdir(t.TempDir())
	long := strings.Repeat("s", 32)
	prod := prodEnv(nil)
	for name, secrets := range map[string]string{"short": "whsec_short", "one of two short": long + ",whsec_short"} {
		prod["VENDOR_WEBHOOK_SECRET"] = secrets
		_, err := Load(envOf(prod))
		if err == nil || !strings.Contains(err.Error(), "VENDOR_WEBHOOK_SECRET") || strings.Contains(err.Error(), "whsec_short") {
			t.Errorf("%s: err = %v, want VENDOR_WEBHOOK_SECRET named, the secret not shown", name, err)
		}
	}
	prod["VENDOR_WEBHOOK_SECRET"] = long
	if _, err := Load(envOf(prod)); err != nil {
		t.Errorf("a 32-byte secret was refused: %v", err)
	}
	if _, err := Load(envOf(map[string]string{"VENDOR_WEBHOOK_SECRET": "whsec_short"})); err != nil {
		t.Errorf("a short secret outside production was refused: %v", err)
	}
}

// URLOf is the URL of a listen address, loopback for every interface.
func TestURLOf(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9999": "http://127.0.0.1:9999", ":8081": "http://127.0.0.1:8081", "0.0.0.0:8082": "http://127.0.0.1:8082",
		"[::]:8083": "http://127.0.0.1:8083", "[::1]:8084": "http://[::1]:8084", "localhost:8085": "http://localhost:8085",
	} {
		if got := URLOf(addr); got != want {
			t.Errorf("URLOf(%s) = %q, want %q", addr, got, want)
		}
	}
}

// APP_URL is the links' base and the tokens' issuer (production requires
// it: TestRefusalsNameTheVariables).
func TestAppURLRequiredInProduction(t *testing.T) {
	t.Chdir(t.TempDir())
	// Outside production the links follow the address served, and the
	// issuer is one default whatever APP_ADDR: every process (serve on any
	// port, a one-off token issue) agrees on it.
	for addr, url := range map[string]string{"": DefaultURL, "127.0.0.1:9999": "http://127.0.0.1:9999", ":9000": "http://127.0.0.1:9000"} {
		if c, err := Load(envOf(map[string]string{"APP_ADDR": addr})); err != nil || c.URL != url || c.Issuer != DefaultURL {
			t.Errorf("APP_ADDR=%q without APP_URL: URL %q, issuer %q, %v; want %q and %q", addr, c.URL, c.Issuer, err, url, DefaultURL)
		}
	}
	if c, err := Load(envOf(map[string]string{"APP_ADDR": ":9000", "APP_URL": "https://api.test"})); err != nil || c.URL != "https://api.test" || c.Issuer != "https://api.test" {
		t.Errorf("APP_URL set: URL %q, issuer %q, %v; want it as given for both", c.URL, c.Issuer, err)
	}
}

func TestConsoleSettings(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Load(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Console{SessionTTL: 8 * time.Hour, LoginsPerMinute: 10}); c.Console != want {
		t.Errorf("local defaults: %+v, want %+v (served, no Secure cookie over http)", c.Console, want)
	}
	c, err = Load(envOf(map[string]string{"APP_ENV": "testing", "CONSOLE_ENABLED": "false", "CONSOLE_SESSION_TTL": "30m", "CONSOLE_LOGINS_PER_MINUTE": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Console{Disabled: true, SessionTTL: 30 * time.Minute, LoginsPerMinute: 3, SecureCookie: true}); c.Console != want {
		t.Errorf("set: %+v, want %+v", c.Console, want)
	}
}

// Each of these settings takes its default when unset (""), and the values
// given (spaces trimmed), and a bad value stops the start naming the
// variable.
func TestSettings(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, s := range []struct {
		name string
		get  func(Config) any
		good map[string]any
		bad  []string
	}{
		// 20 by default; 0 turns it off.
		{"CONSUMER_CONCURRENCY", func(c Config) any { return c.ConsumerConcurrency },
			map[string]any{"": 20, "0": 0, "1": 1, " 50 ": 50}, []string{"-1", "many", "2.5", "2000000"}},
		{"RATE_LIMIT_PER_MINUTE", func(c Config) any { return c.RateLimitPerMinute },
			map[string]any{"": 600, "0": 0, "5": 5, " 1200 ": 1200}, []string{"-1", "lots", "1.5", "2000000000"}},
		// A fraction in (0, 1], 1 by default.
		{"RATE_LIMIT_FALLBACK_SHARE", func(c Config) any { return c.RateLimitFallbackShare },
			map[string]any{"": 1.0, "1": 1.0, "0.5": 0.5, " 0.25 ": 0.25, "1e-1": 0.1}, []string{"0", "-0.5", "1.5", "half", "50%", "NaN", "Inf"}},
		// 1 by default: each request counted on its own.
		{"RATE_LIMIT_BATCH", func(c Config) any { return c.RateLimitBatch }, map[string]any{"": 1, "16": 16}, []string{"0"}},
		{"REDIS_TIMEOUT", func(c Config) any { return c.RedisTimeout },
			map[string]any{"": 100 * time.Millisecond, "2s": 2 * time.Second}, nil},
		// 25 by default; 0: every destructive fix needs --force.
		{"DRIFT_MAX_FIX", func(c Config) any { return c.DriftMaxFix }, map[string]any{"": 25, "0": 0, "3": 3}, []string{"-1", "ten"}},
		// 6h by default; "0" turns the check off.
		{"DRIFT_INTERVAL", func(c Config) any { return c.DriftEvery },
			map[string]any{"": 6 * time.Hour, "0": time.Duration(0)}, []string{"-1h"}},
		// SQLite's read pool: 0 (one per CPU) unless set.
		{"DB_READ_CONNS", func(c Config) any { return c.DB.ReadConns }, map[string]any{"": 0, "4": 4}, []string{"-1"}},
		// A comma list, as Laravel's env('CORS_ALLOWED_ORIGINS') split into
		// config/cors.php allowed_origins; empty is "*", any origin. A
		// trailing slash is dropped: an Origin never has one.
		{"CORS_ALLOWED_ORIGINS", func(c Config) any { return c.CORSAllowedOrigins }, map[string]any{"": []string{"*"}, " ": []string{"*"},
			"*": []string{"*"}, "https://app.example": []string{"https://app.example"},
			" https://a.example/ , https://*.b.example,,": []string{"https://a.example", "https://*.b.example"}}, nil},
		// A comma list of addresses and CIDR ranges, as Laravel's
		// TrustProxies; empty trusts no proxy, and "*" is refused.
		{"TRUSTED_PROXIES", func(c Config) any { return c.TrustedProxies }, map[string]any{"": "[]", "10.0.0.5": "[10.0.0.5/32]",
			" 10.0.0.0/8 , 2001:db8::1":                        "[10.0.0.0/8 2001:db8::1/128]",
			"::ffff:10.0.0.5,10.1.2.3/16,::ffff:192.0.2.0/120": "[10.0.0.5/32 10.1.0.0/16 192.0.2.0/24]"},
			[]string{"*", "10.0.0.5,*", "proxy.internal", "10.0.0.0/33", "10.0.0.5:80"}},
	} {
		for env, want := range s.good {
			c, err := Load(envOf(map[string]string{s.name: env}))
			if got := s.get(c); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s=%q: %v, %v; want %v", s.name, env, got, err, want)
			}
		}
		for _, env := range s.bad {
			_, err := Load(envOf(map[string]string{s.name: env}))
			if err == nil || !strings.Contains(err.Error(), s.name) {
				t.Errorf("%s=%q: err = %v, want one naming the variable", s.name, env, err)
			}
		}
	}
}
