package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

// The README's path with another port: APP_ADDR changed, APP_URL unset. The
// token the CLI issues (with the same environment) works against the server
// on that address, since both derive the issuer, APP_URL, from APP_ADDR; and
// the API's absolute links point at the address served, not at
// 127.0.0.1:8080.
func TestChangedAddrWithoutURLTokensWork(t *testing.T) {
	t.Chdir(t.TempDir())
	addr := testkit.FreeAddr(t)
	env := getenvOf(map[string]string{"APP_ADDR": addr})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, env, &bytes.Buffer{}, &testkit.Buffer{}) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	waitHealthy(t, "http://"+addr, done)

	var out bytes.Buffer
	if err := Run(context.Background(), []string{"token", "issue", "--consumer", "acme", "--abilities", "licenses:read"}, env, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/licenses", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(out.String()))
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Meta struct {
			Path string `json:"path"`
		} `json:"meta"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /api/licenses with the CLI's token on APP_ADDR=%s = %d (%v), want 200", addr, resp.StatusCode, err)
	}
	if want := "http://" + addr + "/api/licenses"; page.Meta.Path != want {
		t.Errorf("meta.path = %q, want %q: APP_URL follows APP_ADDR", page.Meta.Path, want)
	}
}
