package testdb

import (
	"runtime"
	"strings"
	"testing"
)

func TestServicePolicy(t *testing.T) {
	for _, s := range []service{mysqlService, redisService} {
		env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
		tests := []struct {
			name                   string
			vars                   map[string]string
			wantRun, wantSkip, bad bool
		}{
			{s.variable + " set", map[string]string{s.variable: s.example}, true, false, false},
			{s.variable + " set in CI", map[string]string{s.variable: s.example, "CI": "true"}, true, false, false},
			{"no " + s.variable + " on a laptop", nil, false, true, false},
			{"no " + s.variable + " in CI", map[string]string{"CI": "true"}, false, false, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				value, skip, err := s.policy(env(tt.vars))
				if (value != "") != tt.wantRun || (skip != "") != tt.wantSkip || (err != nil) != tt.bad {
					t.Fatalf("got value=%q skip=%q err=%v", value, skip, err)
				}
				if tt.wantSkip && !strings.Contains(skip, s.variable+"="+s.example) {
					t.Errorf("the skip line does not say how to run the %s: %q", s.what, skip)
				}
			})
		}
	}
}

// In CI an unreachable MySQL or Redis fails the test rather than skipping
// it: the connection error is fatal whatever the environment says.
func TestUnreachableServiceFails(t *testing.T) {
	for _, tc := range []struct {
		name, variable, value string
		open                  func(testing.TB)
	}{
		{"MySQL", "TEST_MYSQL_DSN", "root@tcp(127.0.0.1:1)/", func(t testing.TB) { mysqlDatabase(t) }},
		{"Redis", "TEST_REDIS_URL", "redis://127.0.0.1:1/0", func(t testing.TB) { RedisURL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.variable, tc.value)
			ft := &fatalRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.open(ft)
			}()
			<-done
			if !ft.failed || ft.skipped {
				t.Errorf("unreachable %s: failed=%v skipped=%v, want a failure", tc.name, ft.failed, ft.skipped)
			}
		})
	}
}

// fatalRecorder notes Fatal and Skip instead of ending the real test; like
// the real ones, they end the goroutine that calls them.
type fatalRecorder struct {
	testing.TB
	failed, skipped bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true; runtime.Goexit() }

func (f *fatalRecorder) Fatal(...any) { f.failed = true; runtime.Goexit() }

func (f *fatalRecorder) Skip(...any) { f.skipped = true; runtime.Goexit() }
