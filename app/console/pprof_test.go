package console

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

// PPROF_ADDR serves Go's profiles on an address of its own, and the API's
// address does not; without it, nothing serves them.
func TestServeProfilesOnPprofAddrOnly(t *testing.T) {
	t.Chdir(t.TempDir())
	addr, pprofAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	env := getenvOf(map[string]string{"APP_ADDR": addr, "PPROF_ADDR": pprofAddr,
		"APP_KEY": testKey})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, env, &bytes.Buffer{}, &testkit.Buffer{}) }()
	waitHealthy(t, "http://"+addr, done)
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := get("http://" + pprofAddr + "/debug/pprof/"); status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("PPROF_ADDR /debug/pprof/: %d %.200s", status, body)
	}
	if status, body := get("http://" + pprofAddr + "/debug/pprof/profile?seconds=1"); status != http.StatusOK || len(body) == 0 {
		t.Errorf("a CPU profile: %d, %d bytes", status, len(body))
	}
	if status, _ := get("http://" + addr + "/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("the API's address serves /debug/pprof/: %d", status)
	}
}
