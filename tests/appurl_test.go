package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/internal/testkit"
)

// Outside production, with APP_URL unset, the links follow the address
// served while the tokens' issuer stays one default: serve on another
// APP_ADDR takes a token a one-off `token issue` (without that APP_ADDR)
// made, and its links name the address it serves, not 127.0.0.1:8080.
func TestAppURLUnsetFollowsTheServedAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "APP_STORAGE=" + dir,
		"DB_DATABASE=" + filepath.Join(dir, "licensor.sqlite"), "RATE_LIMIT_PER_MINUTE=0"}
	runCmd(t, env, "migrate")
	addr := testkit.FreeAddr(t)
	start(t, append(env, "APP_ADDR="+addr), "serve")
	waitFor(t, "http://"+addr+"/healthz", "", http.StatusOK)
	token := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "acme", "--abilities", "licenses:read,licenses:write"))
	code, _, body := send("http://"+addr+"/api/licenses", http.MethodGet, token, "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/licenses with a token issued without APP_ADDR = %d %s, want 200", code, body)
	}
	var page struct {
		Links struct{ First string } `json:"links"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if want := "http://" + addr + "/api/licenses"; !strings.HasPrefix(page.Links.First, want) {
		t.Errorf("links.first = %q, want it under %s (the address served)", page.Links.First, want)
	}
}
