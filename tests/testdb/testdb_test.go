package testdb

import (
	"runtime"
	"strings"
	"testing"
)

func TestMySQLPolicy(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name                   string
		vars                   map[string]string
		wantRun, wantSkip, bad bool
	}{
		{"DSN set", map[string]string{"TEST_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/"}, true, false, false},
		{"DSN set in CI", map[string]string{"TEST_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/", "CI": "true"}, true, false, false},
		{"no DSN on a laptop", nil, false, true, false},
		{"no DSN in CI", map[string]string{"CI": "true"}, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn, skip, err := mysqlPolicy(env(tt.vars))
			if (dsn != "") != tt.wantRun || (skip != "") != tt.wantSkip || (err != nil) != tt.bad {
				t.Fatalf("got dsn=%q skip=%q err=%v", dsn, skip, err)
			}
			if tt.wantSkip && !strings.Contains(skip, "TEST_MYSQL_DSN") {
				t.Errorf("the skip line does not say how to run the half: %q", skip)
			}
		})
	}
}

// In CI an unreachable MySQL fails the test rather than skipping it: the
// connection error is fatal whatever the environment says.
func TestUnreachableMySQLFails(t *testing.T) {
	t.Setenv("TEST_MYSQL_DSN", "root@tcp(127.0.0.1:1)/")
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mysqlDatabase(ft)
	}()
	<-done
	if !ft.failed || ft.skipped {
		t.Errorf("unreachable MySQL: failed=%v skipped=%v, want a failure", ft.failed, ft.skipped)
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
