package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns TEST_REDIS_URL (for example redis://127.0.0.1:6379/0),
// skipping the test when it is unset and failing it under CI=true, as
// MySQLDSN does; a Redis there that does not answer fails the test.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := fromEnv(t, redisService)
	c := redisClient(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at TEST_REDIS_URL does not answer: %v", err)
	}
	return u
}

// RedisPrefix is a key prefix of the test's own in the Redis at url
// ("licensor-test:<random>:"), whose keys are deleted when the test ends,
// so that tests running at once never count in each other's keys.
func RedisPrefix(t testing.TB, url string) string {
	t.Helper()
	prefix := "licensor-test:" + randomHex(6) + ":"
	DeleteRedisKeys(t, url, prefix+"*")
	return prefix
}

// DeleteRedisKeys deletes, when the test ends, the keys of the Redis at
// url that match pattern (a SCAN MATCH pattern, e.g. a consumer's
// "licensor:rl:<id>:*").
func DeleteRedisKeys(t testing.TB, url, pattern string) {
	t.Helper()
	c := redisClient(t, url)
	t.Cleanup(func() { deleteKeys(t, c, pattern) })
}

// DeleteRedisKeysNow deletes the keys of the Redis at url that match
// pattern, now: for a cleanup that learns the pattern only as it runs.
func DeleteRedisKeysNow(t testing.TB, url, pattern string) {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Errorf("TEST_REDIS_URL: %v", err)
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	deleteKeys(t, c, pattern)
}

func deleteKeys(t testing.TB, c *redis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scan the test's Redis keys %s: %v", pattern, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("delete the test's Redis keys %s: %v", pattern, err)
		}
	}
}

// RedisKeys lists the keys of the Redis at url that match pattern.
func RedisKeys(t testing.TB, url, pattern string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := redisClient(t, url).Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatalf("keys %s: %v", pattern, err)
	}
	return keys
}

// redisClient is a client of the test's own on url, closed when it ends
// (after the cleanups registered after it).
func redisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
