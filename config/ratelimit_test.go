package config

import (
	"strings"
	"testing"
)

// RATE_LIMIT_STORE defaults to Redis when REDIS_URL is set; otherwise to
// what licensor did before it could be set: the database on MySQL (shared
// by the replicas), memory on SQLite. A store named wins.
func TestRateLimitStoreDefaultsByDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{nil, RateLimitMemory},
		{map[string]string{"DB_CONNECTION": "sqlite"}, RateLimitMemory},
		{map[string]string{"DB_CONNECTION": "mysql"}, RateLimitDatabase},
		{map[string]string{"DB_CONNECTION": "mysql", "RATE_LIMIT_STORE": "memory"}, RateLimitMemory},
		{map[string]string{"RATE_LIMIT_STORE": "database"}, RateLimitDatabase},
		{map[string]string{"DB_CONNECTION": "mysql", "RATE_LIMIT_STORE": " redis ", "REDIS_URL": "redis://127.0.0.1:6379/0"}, RateLimitRedis},
		{map[string]string{"DB_CONNECTION": "mysql", "REDIS_URL": "redis://127.0.0.1:6379/0"}, RateLimitRedis},
		{map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0"}, RateLimitRedis},
		{map[string]string{"DB_CONNECTION": "mysql", "REDIS_URL": "redis://127.0.0.1:6379/0", "RATE_LIMIT_STORE": "database"}, RateLimitDatabase},
		{map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0", "RATE_LIMIT_STORE": "memory"}, RateLimitMemory},
	} {
		c, err := Load(envOf(tt.env))
		if err != nil || c.RateLimitStore != tt.want {
			t.Errorf("%v: store %q, %v; want %q", tt.env, c.RateLimitStore, err, tt.want)
		}
	}
}

func TestRedisURL(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{"redis://127.0.0.1:6379/0", "redis://127.0.0.1", "redis://:pw@redis.internal:6380/3",
		"rediss://user:pw@redis.example:6380", "unix:///run/redis/redis.sock", "redis://[::1]:6379/15?dial_timeout=1s"} {
		c, err := Load(envOf(map[string]string{"RATE_LIMIT_STORE": "redis", "REDIS_URL": u}))
		if err != nil || c.RedisURL != u {
			t.Errorf("REDIS_URL=%q: %q, %v; want it taken", u, c.RedisURL, err)
		}
	}
	// A bad value stops the start naming the variable, whatever the store
	// (it was set for a reason), and never shows the password.
	for _, store := range []string{"redis", "memory"} {
		for _, u := range []string{"127.0.0.1:6379", "http://127.0.0.1:6379", "redis://:s3cret@/0", "redis://:s3cret@127.0.0.1:6379/zero",
			"redis://:s3cret@127.0.0.1:port/0", "unix://", "redis://:s3cret@127.0.0.1:6379/-1"} {
			_, err := Load(envOf(map[string]string{"RATE_LIMIT_STORE": store, "REDIS_URL": u}))
			if err == nil || !strings.Contains(err.Error(), "REDIS_URL") {
				t.Errorf("RATE_LIMIT_STORE=%s REDIS_URL=%q: err = %v, want one naming REDIS_URL", store, u, err)
			} else if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("REDIS_URL=%q: the error shows the password: %v", u, err)
			}
		}
	}
}

func TestRedactRedisURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:s3cret@127.0.0.1:6379/0":    "redis://:xxxxx@127.0.0.1:6379/0",
		"rediss://app:s3cret@redis.example/1": "rediss://app:xxxxx@redis.example/1",
		"redis://127.0.0.1:6379/0":            "redis://127.0.0.1:6379/0",
		"redis://:s3cret@127.0.0.1:port/0":    "(not a URL)",
	} {
		if got := RedactRedisURL(in); got != want {
			t.Errorf("RedactRedisURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// The default store is Redis when REDIS_URL names one, else the database's
// on MySQL and memory's on SQLite, for Load and for a hand-made
// configuration the bootstrap completes alike.
func TestDefaultRateLimitStore(t *testing.T) {
	for _, c := range []struct{ conn, redis, want string }{
		{"mysql", "", RateLimitDatabase},
		{"sqlite", "", RateLimitMemory},
		{"mysql", "redis://127.0.0.1:6379/0", RateLimitRedis},
		{"sqlite", "redis://127.0.0.1:6379/0", RateLimitRedis},
	} {
		if got := DefaultRateLimitStore(c.conn, c.redis); got != c.want {
			t.Errorf("DefaultRateLimitStore(%q, %q) = %q, want %q", c.conn, c.redis, got, c.want)
		}
	}
}
