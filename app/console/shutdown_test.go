package console

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

// TestShutdownLetsRequestsInFlightFinish cancels serve's context (what
// SIGTERM does) while a create waits on the vendor: the create still
// completes and is answered, and serve then returns cleanly.
func TestShutdownLetsRequestsInFlightFinish(t *testing.T) {
	t.Chdir(t.TempDir())
	entered, release := make(chan struct{}), make(chan struct{})
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"data":[]}`))
			return
		}
		close(entered)
		<-release
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"data":{"id":"site_1","name":"A","domain":"a.test","license_key":"LK-1","status":"active"}}`))
	}))
	defer vendor.Close()

	addr := testkit.FreeAddr(t)
	env := getenvOf(map[string]string{
		"APP_ADDR": addr, "APP_KEY": testKey,
		"VENDOR_DRIVER": "http", "VENDOR_URL": vendor.URL, "VENDOR_TOKEN": "t",
	})
	migrateHere(t, env)
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"token", "issue", "--consumer", "acme", "--abilities", "licenses:write"}, env, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out.String())

	ctx, sigterm := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, env, &bytes.Buffer{}, &testkit.Buffer{}) }()
	waitHealthy(t, "http://"+addr, done)

	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/licenses", strings.NewReader(`{"name":"A","domain":"a.test"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-entered
	sigterm() // the request is in flight: serve must drain, not drop it
	close(release)
	if got := <-status; got != http.StatusCreated {
		t.Fatalf("in-flight create answered %d, want 201", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after the last request finished")
	}
}
