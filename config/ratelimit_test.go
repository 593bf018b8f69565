package config

import (
	"strings"
	"testing"
)

func TestRateLimitPerMinute(t *testing.T) {
	t.Chdir(t.TempDir())
	for env, want := range map[string]int{"": 600, "0": 0, "5": 5, " 1200 ": 1200} {
		c, err := Load(envOf(map[string]string{"RATE_LIMIT_PER_MINUTE": env}))
		if err != nil || c.RateLimitPerMinute != want {
			t.Errorf("RATE_LIMIT_PER_MINUTE=%q: %d, %v; want %d", env, c.RateLimitPerMinute, err, want)
		}
	}
	for _, env := range []string{"-1", "lots", "1.5", "2000000000"} {
		_, err := Load(envOf(map[string]string{"RATE_LIMIT_PER_MINUTE": env}))
		if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_PER_MINUTE") {
			t.Errorf("RATE_LIMIT_PER_MINUTE=%q: err = %v, want one naming the variable", env, err)
		}
	}
}
