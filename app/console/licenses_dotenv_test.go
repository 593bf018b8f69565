package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
)

// `licensor licenses` reads LICENSOR_URL and LICENSOR_TOKEN from the working
// directory's .env, as serve reads its settings; the environment wins.
func TestLicensesReadsDotenv(t *testing.T) {
	t.Chdir(t.TempDir())
	api := newLicensesAPI(t, licensesReply{http.StatusOK, `{"data":[],"meta":{"current_page":1,"per_page":15,"total":0,"last_page":1}}`})
	dotenv := fmt.Sprintf("LICENSOR_URL=%s\nLICENSOR_TOKEN=%s\n", api.URL, licensesTestToken)
	if err := os.WriteFile(".env", []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"licenses", "list"}, getenvOf(nil), &stdout, &stderr); err != nil {
		t.Fatalf("licenses list with .env only: %v (%s)", err, stderr.String())
	}
	if got := api.auths; len(got) != 1 || got[0] != "Bearer "+licensesTestToken {
		t.Errorf("Authorization sent %q, want the .env's token", got)
	}
	// The environment wins over .env.
	err := Run(context.Background(), []string{"licenses", "list"}, getenvOf(map[string]string{"LICENSOR_TOKEN": "from-env"}), &stdout, &stderr)
	if err != nil || api.auths[len(api.auths)-1] != "Bearer from-env" {
		t.Errorf("with LICENSOR_TOKEN in the environment: %v, sent %q", err, api.auths)
	}
}

// Without LICENSOR_URL the client calls the server the directory
// configures: APP_URL, or the URL of APP_ADDR, from the environment or .env;
// without those either, where `go run .` serves.
func TestLicensesDefaultURLFollowsServerConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{}, defaultLicensorURL},
		{map[string]string{"APP_ADDR": "127.0.0.1:9123"}, "http://127.0.0.1:9123"},
		{map[string]string{"APP_ADDR": ":9124", "APP_URL": "https://api.test"}, "https://api.test"},
		{map[string]string{"APP_ADDR": ":9124", "APP_URL": "https://api.test", "LICENSOR_URL": "http://other.test"}, "http://other.test"},
	} {
		tc.vars["LICENSOR_TOKEN"] = "x"
		if _, base, err := licensorClient(env{getenv: getenvOf(tc.vars)}, nil); err != nil || base != tc.want {
			t.Errorf("%v: base %q, %v; want %q", tc.vars, base, err, tc.want)
		}
	}
}
