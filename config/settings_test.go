package config

import (
	"strings"
	"testing"
	"time"
)

// Each numeric setting takes its default when unset ("") and the values
// given (spaces trimmed), and a bad value stops the start naming the
// variable.
func TestNumericSettings(t *testing.T) {
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
	} {
		for env, want := range s.good {
			c, err := Load(envOf(map[string]string{s.name: env}))
			if got := s.get(c); err != nil || got != want {
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
