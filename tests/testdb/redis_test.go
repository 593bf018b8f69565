package testdb

import (
	"strings"
	"testing"
)

func TestRedisPolicy(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name                   string
		vars                   map[string]string
		wantRun, wantSkip, bad bool
	}{
		{"URL set", map[string]string{"TEST_REDIS_URL": "redis://127.0.0.1:6379/0"}, true, false, false},
		{"URL set in CI", map[string]string{"TEST_REDIS_URL": "redis://127.0.0.1:6379/0", "CI": "true"}, true, false, false},
		{"no URL on a laptop", nil, false, true, false},
		{"no URL in CI", map[string]string{"CI": "true"}, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, skip, err := redisPolicy(env(tt.vars))
			if (url != "") != tt.wantRun || (skip != "") != tt.wantSkip || (err != nil) != tt.bad {
				t.Fatalf("got url=%q skip=%q err=%v", url, skip, err)
			}
			if tt.wantSkip && !strings.Contains(skip, "TEST_REDIS_URL") {
				t.Errorf("the skip line does not say how to run the test: %q", skip)
			}
		})
	}
}

// A Redis at TEST_REDIS_URL that does not answer fails the test rather
// than skipping it.
func TestUnreachableRedisFails(t *testing.T) {
	t.Setenv("TEST_REDIS_URL", "redis://127.0.0.1:1/0")
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RedisURL(ft)
	}()
	<-done
	if !ft.failed || ft.skipped {
		t.Errorf("unreachable Redis: failed=%v skipped=%v, want a failure", ft.failed, ft.skipped)
	}
}
