package config

import (
	"strings"
	"testing"
)

// CONSUMER_CONCURRENCY defaults to 20, 0 turns it off, and a bad value
// stops the start naming the variable.
func TestConsumerConcurrency(t *testing.T) {
	t.Chdir(t.TempDir())
	for env, want := range map[string]int{"": 20, "0": 0, "1": 1, " 50 ": 50} {
		c, err := Load(envOf(map[string]string{"CONSUMER_CONCURRENCY": env}))
		if err != nil || c.ConsumerConcurrency != want {
			t.Errorf("CONSUMER_CONCURRENCY=%q: %d, %v; want %d", env, c.ConsumerConcurrency, err, want)
		}
	}
	for _, env := range []string{"-1", "many", "2.5", "2000000"} {
		_, err := Load(envOf(map[string]string{"CONSUMER_CONCURRENCY": env}))
		if err == nil || !strings.Contains(err.Error(), "CONSUMER_CONCURRENCY") {
			t.Errorf("CONSUMER_CONCURRENCY=%q: err = %v, want one naming the variable", env, err)
		}
	}
}
