package console

import (
	"net/http"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/internal/testkit"
)

// PPROF_ADDR serves Go's profiles on an address of its own, and the API's
// address does not; without it, nothing serves them.
func TestServeProfilesOnPprofAddrOnly(t *testing.T) {
	t.Chdir(t.TempDir())
	addr, pprofAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	env := getenvOf(map[string]string{"APP_ADDR": addr, "PPROF_ADDR": pprofAddr,
		"APP_KEY": testKey})
	stop := startServe(t, addr, env, &testkit.Buffer{})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("serve returned %v", err)
		}
	}()
	if status, body := get(t, "http://"+pprofAddr+"/debug/pprof/"); status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("PPROF_ADDR /debug/pprof/: %d %.200s", status, body)
	}
	if status, body := get(t, "http://"+pprofAddr+"/debug/pprof/profile?seconds=1"); status != http.StatusOK || len(body) == 0 {
		t.Errorf("a CPU profile: %d, %d bytes", status, len(body))
	}
	if status, _ := get(t, "http://"+addr+"/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("the API's address serves /debug/pprof/: %d", status)
	}
}
