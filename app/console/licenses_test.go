package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/client"
)

const (
	licensesTestToken = "cli-test-token"
	licensesTestJSON  = `{"id":"01JCLI","name":"Acme","domain":"acme.test","license_key":"LK-9","status":"active",` +
		`"vendor_site_id":"site_9","created_at":"2026-11-30T10:00:00Z","updated_at":"2026-11-30T10:00:00Z"}`
)

// licensesReply is one scripted answer of a licensesAPI.
type licensesReply struct {
	status int
	body   string
}

// licensesAPI is a fake licensor API: it answers from a script (its last
// reply repeating) and records each request's line, key and Authorization.
type licensesAPI struct {
	*httptest.Server
	mu     sync.Mutex
	script []licensesReply
	lines  []string
	keys   []string
	auths  []string
}

func newLicensesAPI(t *testing.T, script ...licensesReply) *licensesAPI {
	t.Helper()
	a := &licensesAPI{script: script}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		a.mu.Lock()
		n := len(a.lines)
		a.lines = append(a.lines, r.Method+" "+r.URL.RequestURI())
		a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
		a.auths = append(a.auths, r.Header.Get("Authorization"))
		rp := a.script[min(n, len(a.script)-1)]
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", fmt.Sprintf("cli-req-%d", n+1))
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
	}))
	t.Cleanup(a.Close)
	return a
}

// requests returns the request lines, keys and Authorization headers seen.
func (a *licensesAPI) requests() (lines, keys, auths []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.lines), slices.Clone(a.keys), slices.Clone(a.auths)
}

// licensesEnv is the environment of `licensor licenses …` against base.
func licensesEnv(args []string, base string, stdout, stderr io.Writer) env {
	return env{args: args, getenv: getenvOf(map[string]string{"LICENSOR_URL": base, "LICENSOR_TOKEN": licensesTestToken}),
		stdout: stdout, stderr: stderr}
}

// TestLicensesCreateRetriesWithOneKey: a 503 and then a 201; the command
// retries once after a backoff (recorded, not waited) with the same key,
// and prints the license.
func TestLicensesCreateRetriesWithOneKey(t *testing.T) {
	api := newLicensesAPI(t,
		licensesReply{503, `{"message":"The license vendor is unavailable. Try again later.","code":"vendor_unavailable"}`},
		licensesReply{201, `{"data":` + licensesTestJSON + `}`})
	var waits []time.Duration
	recordWait := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	var stdout, stderr bytes.Buffer
	e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test"}, api.URL, &stdout, &stderr)
	if err := licensesCmd(context.Background(), e, client.WithSleep(recordWait)); err != nil {
		t.Fatalf("licenses create: %v\n%s", err, stderr.String())
	}
	lines, keys, auths := api.requests()
	if got, want := strings.Join(lines, ", "), "POST /api/licenses, POST /api/licenses"; got != want {
		t.Fatalf("requests = %s, want %s", got, want)
	}
	if keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("Idempotency-Keys = %q, want one key, sent twice", keys)
	}
	if auths[0] != "Bearer "+licensesTestToken {
		t.Errorf("Authorization = %q, want the LICENSOR_TOKEN", auths[0])
	}
	if len(waits) != 1 || waits[0] <= 0 || waits[0] > client.DefaultBaseDelay {
		t.Errorf("waits = %v, want one backoff within (0, %v]", waits, client.DefaultBaseDelay)
	}
	if !strings.Contains(stdout.String(), `"id": "01JCLI"`) || !strings.Contains(stdout.String(), `"license_key": "LK-9"`) {
		t.Errorf("stdout = %s, want the license as JSON", stdout.String())
	}
	if got, want := stderr.String(), "created license 01JCLI for acme.test\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// TestLicensesCreateFailureSaysWhatToDo: a refusal is not retried and its
// message, code and advice reach the user; a call that gives up names the
// key that picks the outcome up. Both exit 1, not 2.
func TestLicensesCreateFailureSaysWhatToDo(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		api := newLicensesAPI(t, licensesReply{409, `{"message":"The domain is already licensed.","code":"domain_taken"}`})
		e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test"}, api.URL, &bytes.Buffer{}, &bytes.Buffer{})
		err := licensesCmd(context.Background(), e)
		assertLicensesFailure(t, err, "409 domain_taken", "The domain is already licensed.", "another consumer holds this domain", "cli-req-1")
		if lines, _, _ := api.requests(); len(lines) != 1 {
			t.Errorf("requests = %q, want exactly 1", lines)
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		api := newLicensesAPI(t, licensesReply{422, `{"message":"The domain field is required.","errors":{"domain":["The domain field is required."]}}`})
		e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "-"}, api.URL, &bytes.Buffer{}, &bytes.Buffer{})
		err := licensesCmd(context.Background(), e)
		assertLicensesFailure(t, err, "422", "The domain field is required.", "fix domain and run again")
	})
	t.Run("gave up", func(t *testing.T) {
		api := newLicensesAPI(t, licensesReply{202, `{"message":"The license is being created.","code":"operation_pending"}`})
		noWait := func(context.Context, time.Duration) error { return nil }
		e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test"}, api.URL, &bytes.Buffer{}, &bytes.Buffer{})
		err := licensesCmd(context.Background(), e, client.WithSleep(noWait), client.WithMaxAttempts(3))
		_, keys, _ := api.requests()
		assertLicensesFailure(t, err, "202 operation_pending", "gave up after 3 attempts", "--key "+keys[0])
		if len(keys) != 3 || keys[2] != keys[0] {
			t.Errorf("keys = %q, want the same key on 3 attempts", keys)
		}
	})
}

func assertLicensesFailure(t *testing.T, err error, wants ...string) {
	t.Helper()
	var u usageError
	if err == nil || errors.As(err, &u) {
		t.Fatalf("err = %v, want a failure (exit 1)", err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), licensesTestToken) {
		t.Errorf("err = %q shows the token", err)
	}
}

func TestLicensesList(t *testing.T) {
	second := strings.NewReplacer("01JCLI", "01JCLJ", "acme.test", "globex.test", `"Acme"`, `"Globex Corp"`).Replace(licensesTestJSON)
	api := newLicensesAPI(t, licensesReply{200, `{"data":[` + second + `,` + licensesTestJSON + `],` +
		`"meta":{"current_page":2,"per_page":2,"total":4,"last_page":2}}`})
	var stdout, stderr bytes.Buffer
	e := licensesEnv([]string{"list", "--page", "2", "--per-page", "2"}, api.URL, &stdout, &stderr)
	if err := licensesCmd(context.Background(), e); err != nil {
		t.Fatalf("licenses list: %v", err)
	}
	want := "" +
		"ID      DOMAIN       NAME         STATUS  CREATED\n" +
		"01JCLJ  globex.test  Globex Corp  active  2026-11-30T10:00:00Z\n" +
		"01JCLI  acme.test    Acme         active  2026-11-30T10:00:00Z\n"
	if got := stdout.String(); got != want {
		t.Errorf("stdout =\n%s\nwant\n%s", got, want)
	}
	if got, want := stderr.String(), "page 2 of 2 (4 in all)\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if lines, _, _ := api.requests(); len(lines) != 1 || lines[0] != "GET /api/licenses?page=2&per_page=2" {
		t.Errorf("requests = %q, want GET /api/licenses?page=2&per_page=2", lines)
	}
}

// list --json prints the page as the API shapes it; create takes --json
// too, its default: the same JSON as without it.
func TestLicensesJSON(t *testing.T) {
	api := newLicensesAPI(t, licensesReply{200, `{"data":[` + licensesTestJSON + `],` +
		`"meta":{"current_page":1,"per_page":15,"total":1,"last_page":1}}`})
	var stdout, stderr bytes.Buffer
	if err := licensesCmd(context.Background(), licensesEnv([]string{"list", "--json"}, api.URL, &stdout, &stderr)); err != nil {
		t.Fatalf("licenses list --json: %v", err)
	}
	var page struct {
		Data []map[string]any `json:"data"`
		Meta map[string]int   `json:"meta"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &page); err != nil {
		t.Fatalf("list --json printed %q: %v", stdout.String(), err)
	}
	if len(page.Data) != 1 || page.Data[0]["id"] != "01JCLI" || page.Data[0]["license_key"] != "LK-9" ||
		!reflect.DeepEqual(page.Meta, map[string]int{"current_page": 1, "per_page": 15, "total": 1, "last_page": 1}) {
		t.Errorf("list --json = %s, want the page with its meta", stdout.String())
	}
	if got, want := stderr.String(), "page 1 of 1 (1 in all)\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}

	empty := newLicensesAPI(t, licensesReply{200, `{"data":[],"meta":{"current_page":1,"per_page":15,"total":0,"last_page":1}}`})
	stdout.Reset()
	if err := licensesCmd(context.Background(), licensesEnv([]string{"list", "--json"}, empty.URL, &stdout, &bytes.Buffer{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `"data": []`) {
		t.Errorf("an empty page = %s, want \"data\": []", stdout.String())
	}

	created := newLicensesAPI(t, licensesReply{201, `{"data":` + licensesTestJSON + `}`})
	outputs := map[string]string{}
	for _, args := range [][]string{{"create", "--name", "Acme", "--domain", "acme.test"}, {"create", "--json", "--name", "Acme", "--domain", "acme.test"}} {
		var out bytes.Buffer
		if err := licensesCmd(context.Background(), licensesEnv(args, created.URL, &out, &bytes.Buffer{})); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		outputs[strings.Join(args, " ")] = out.String()
	}
	if len(outputs) != 2 || outputs["create --name Acme --domain acme.test"] != outputs["create --json --name Acme --domain acme.test"] ||
		!strings.Contains(outputs["create --json --name Acme --domain acme.test"], `"id": "01JCLI"`) {
		t.Errorf("create with and without --json printed %q, want the same JSON", outputs)
	}
	err := licensesCmd(context.Background(), licensesEnv([]string{"create", "--json=false", "--name", "Acme", "--domain", "acme.test"}, created.URL, &bytes.Buffer{}, &bytes.Buffer{}))
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "--json") {
		t.Errorf("create --json=false = %v, want a usage error naming --json", err)
	}
}

func TestLicensesUsageErrors(t *testing.T) {
	api := newLicensesAPI(t, licensesReply{500, `{"message":"Server Error"}`})
	full := map[string]string{"LICENSOR_URL": api.URL, "LICENSOR_TOKEN": licensesTestToken}
	create := []string{"create", "--name", "Acme", "--domain", "acme.test"}
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string // in the message
	}{
		{"no subcommand", nil, full, "create, list or rotate-key"},
		{"unknown subcommand", []string{"delete"}, full, "unknown subcommand"},
		{"create without --domain", []string{"create", "--name", "Acme"}, full, "--domain"},
		{"create with an argument", append(create, "extra"), full, "unexpected argument"},
		{"a bad flag", []string{"create", "--colour", "red"}, full, "colour"},
		{"an invalid --key", append(create, "--key", "has space"), full, "--key"},
		{"no LICENSOR_TOKEN", create, map[string]string{"LICENSOR_URL": api.URL}, "LICENSOR_TOKEN"},
		{"a bad LICENSOR_URL", create, map[string]string{"LICENSOR_URL": "127.0.0.1:8080", "LICENSOR_TOKEN": "x"}, "LICENSOR_URL"},
		{"list --page 0", []string{"list", "--page", "0"}, full, "--page"},
		{"list --per-page 101", []string{"list", "--per-page", "101"}, full, "--per-page"},
		{"list --per-page x", []string{"list", "--per-page", "x"}, full, "per-page"},
		{"rotate-key without an id", []string{"rotate-key"}, full, "one license ID"},
		{"rotate-key with two ids", []string{"rotate-key", "01JA", "01JB"}, full, "one license ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{args: tt.args, getenv: getenvOf(tt.vars), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
			err := licensesCmd(context.Background(), e)
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("licenses %q = %v, want a usage error naming %s", tt.args, err, tt.want)
			}
		})
	}
	if lines, _, _ := api.requests(); len(lines) != 0 {
		t.Errorf("requests = %q, want none for a usage error", lines)
	}
	if err := licensesCmd(context.Background(), env{args: []string{"--help"}, getenv: getenvOf(nil), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}); err != nil {
		t.Errorf("licenses --help = %v, want nil", err)
	}
}

// TestLicensesRotateKey: `licenses rotate-key ID` posts the rotation with a
// key (the same on the retry after a 503), and prints the new key, or with
// --json (on either side of the id) the license; a revoked license's 409
// says why nothing happened.
func TestLicensesRotateKey(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rotate-key", "01JCLI"}, "LK-9\n"},
		{[]string{"rotate-key", "--json", "01JCLI"}, `"license_key": "LK-9"`},
		{[]string{"rotate-key", "01JCLI", "--json"}, `"vendor_site_id": "site_9"`},
	} {
		api := newLicensesAPI(t,
			licensesReply{503, `{"message":"The license vendor is unavailable. Try again later.","code":"vendor_unavailable"}`},
			licensesReply{200, `{"data":` + licensesTestJSON + `}`})
		var stdout, stderr bytes.Buffer
		noWait := func(context.Context, time.Duration) error { return nil }
		if err := licensesCmd(context.Background(), licensesEnv(tc.args, api.URL, &stdout, &stderr), client.WithSleep(noWait)); err != nil {
			t.Fatalf("licenses %q: %v\n%s", tc.args, err, stderr.String())
		}
		lines, keys, _ := api.requests()
		if got, want := strings.Join(lines, ", "), "POST /api/licenses/01JCLI/rotate-key, POST /api/licenses/01JCLI/rotate-key"; got != want {
			t.Errorf("%q: requests = %s, want %s", tc.args, got, want)
		}
		if keys[0] == "" || keys[0] != keys[1] {
			t.Errorf("%q: Idempotency-Keys = %q, want one key, sent twice", tc.args, keys)
		}
		if !strings.Contains(stdout.String(), tc.want) || stderr.String() != "rotated the key of license 01JCLI for acme.test\n" {
			t.Errorf("%q: stdout = %q, stderr = %q; want %q", tc.args, stdout.String(), stderr.String(), tc.want)
		}
	}
	api := newLicensesAPI(t, licensesReply{409, `{"message":"The license is revoked or being revoked.","code":"license_not_active"}`})
	err := licensesCmd(context.Background(), licensesEnv([]string{"rotate-key", "01JCLI"}, api.URL, &bytes.Buffer{}, &bytes.Buffer{}))
	assertLicensesFailure(t, err, "409 license_not_active", "The license is revoked or being revoked.", "cannot be rotated", "cli-req-1")
}
