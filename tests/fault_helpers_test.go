package tests

// Helpers of the end-to-end fault suite (fault_*_test.go): real licensor
// processes, a vendor-sim steered and read through its /_sim/ routes, and
// the test's database read directly. The kill rig (kill_test.go) lends its
// helpers where a scenario fits it.

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// faultSimToken is the bearer token of the fault suite's simulators.
const faultSimToken = "fault-sim-token"

// faultEnv is the environment of the licensor processes of one fault test:
// the database, the http vendor driver pointed at vendorURL, rate limits
// off (the tests make more requests a minute than a consumer may), the
// bound on a consumer's writes in flight off (a storm sends more at once
// than a consumer may hold: its subject is the races between them), and
// extra, which wins over the defaults (the last value of a variable counts).
func faultEnv(t *testing.T, db *testdb.DB, vendorURL string, extra ...string) []string {
	t.Helper()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"APP_ENV=testing", "APP_KEY=" + config.EncodeKey(testKey),
		"APP_STORAGE=" + t.TempDir(), "LOG_FORMAT=json",
		"VENDOR_DRIVER=http", "VENDOR_URL=" + vendorURL, "VENDOR_TOKEN=" + faultSimToken, "VENDOR_TIMEOUT=5s",
		"RATE_LIMIT_PER_MINUTE=0", "CONSUMER_CONCURRENCY=0",
	}
	if db.Dialect == database.MySQL {
		env = append(env, "DB_CONNECTION=mysql", "DB_URL="+db.Config.URL)
	} else {
		env = append(env, "DB_CONNECTION=sqlite", "DB_DATABASE="+db.Config.Database)
	}
	return append(env, extra...)
}

// faultRig is the preamble every process test of the fault suite shares:
// its database, a vendor-sim read and steered through /_sim/ (which counts
// its calls), the environment of the licensor processes on both, and a
// token of the consumer acme that reads and writes licenses.
type faultRig struct {
	t     *testing.T
	db    *testdb.DB
	sim   *faultSim
	env   []string
	token string
}

// newFaultRig starts vendor-sim with simArgs, builds the environment on db
// and the simulator (faultEnv, env winning over its defaults), migrates the
// database as a deployment does (nothing to do on one testdb.New migrated)
// and issues the token. The test starts its own serves (startServes).
func newFaultRig(t *testing.T, db *testdb.DB, simArgs []string, env ...string) *faultRig {
	t.Helper()
	r := &faultRig{t: t, db: db, sim: startFaultSim(t, simArgs...)}
	r.env = faultEnv(t, db, r.sim.url(), env...)
	runCmd(t, r.env, "migrate")
	r.token = issueToken(t, r.env)
	return r
}

// faultSim is a vendor-sim process, read and steered through /_sim/.
type faultSim struct {
	t    *testing.T
	addr string
	proc *process
}

// startFaultSim starts `licensor vendor-sim` with args on a free port and
// waits until it answers. A free port can be taken by another test's
// process between FreeAddr and the simulator's bind; then the simulator
// exits and another one (of the same token) would answer in its place,
// mixing two tests' vendors. So the start waits for this process's own
// "serving" line, and takes another port when its bind failed.
func startFaultSim(t *testing.T, args ...string) *faultSim {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for range 3 {
		s := &faultSim{t: t, addr: testkit.FreeAddr(t)}
		s.proc = start(t, env, append([]string{"vendor-sim", "--addr", s.addr, "--token", faultSimToken}, args...)...)
		var bound, taken bool
		testkit.Poll(20*time.Second, func() bool {
			out := s.proc.output.String()
			bound = strings.Contains(out, "vendor simulator serving")
			taken = strings.Contains(out, "address already in use")
			return bound || taken
		})
		if taken {
			t.Logf("vendor-sim: %s was taken before it bound; another port", s.addr)
			continue
		}
		if !bound {
			t.Fatalf("vendor-sim on %s never said it was serving:\n%s", s.addr, s.proc.output.String())
		}
		pollFor(t, http.DefaultClient, s.url()+"/_sim/stats", faultSimToken, http.StatusOK)
		return s
	}
	t.Fatal("vendor-sim: three free ports were taken before it bound")
	return nil
}

func (s *faultSim) url() string { return "http://" + s.addr }

// simStats is GET /_sim/stats.
type simStats struct {
	Calls             map[string]map[string]int `json:"calls"`
	CreatesCommitted  int                       `json:"creates_committed"`
	DuplicatesRefused int                       `json:"duplicates_refused"`
	DeletesCommitted  int                       `json:"deletes_committed"`
	Sites             int                       `json:"sites"`
	Dropped           int                       `json:"dropped"`
}

// total is how many vendor requests were answered (or dropped, or given up
// by their client), every route and status together.
func (st simStats) total() int {
	n := 0
	for _, byStatus := range st.Calls {
		for _, c := range byStatus {
			n += c
		}
	}
	return n
}

// stats reads GET /_sim/stats.
func (s *faultSim) stats() simStats {
	s.t.Helper()
	code, _, body := sendVendor(s.url()+"/_sim/stats", http.MethodGet, faultSimToken)
	var st simStats
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		s.t.Fatalf("GET /_sim/stats = %d %s: %v (is the simulator's /_sim/ API there?)", code, body, err)
	}
	return st
}

// setFaults sets the knobs faults names on the simulator (POST
// /_sim/faults); the others stay in force.
func (s *faultSim) setFaults(faults string) {
	s.t.Helper()
	code, _, body := sendWith(http.DefaultClient, s.url()+"/_sim/faults", http.MethodPost, faultSimToken, "", faults)
	if code != http.StatusOK {
		s.t.Fatalf("POST /_sim/faults %s = %d %s", faults, code, body)
	}
}

// clearFaults clears every fault of the simulator (DELETE /_sim/faults).
func (s *faultSim) clearFaults() {
	s.t.Helper()
	code, _, body := sendWith(http.DefaultClient, s.url()+"/_sim/faults", http.MethodDelete, faultSimToken, "", "")
	if code != http.StatusOK {
		s.t.Fatalf("DELETE /_sim/faults = %d %s", code, body)
	}
}

// changeSite makes the simulator change a site on its own side
// (POST /_sim/sites/{id}/suspend|reactivate|delete|rotate), which sends its
// webhook when it has a --webhook-url.
func (s *faultSim) changeSite(id, action string) {
	s.t.Helper()
	code, _, body := sendWith(http.DefaultClient, s.url()+"/_sim/sites/"+id+"/"+action, http.MethodPost, faultSimToken, "", "")
	if code != http.StatusOK {
		s.t.Fatalf("POST /_sim/sites/%s/%s = %d %s", id, action, code, body)
	}
}

// simSite is a site as the simulator lists it.
type simSite struct {
	ID         string `json:"id"`
	Domain     string `json:"domain"`
	LicenseKey string `json:"license_key"`
}

// sites asks the simulator for the domain's sites.
func (s *faultSim) sites(domain string) []simSite {
	s.t.Helper()
	code, _, body := sendVendor(s.url()+"/sites?domain="+url.QueryEscape(domain), http.MethodGet, faultSimToken)
	var list struct {
		Data []simSite `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		s.t.Fatalf("vendor list = %d %s: %v", code, body, err)
	}
	return list.Data
}

// startServes starts n `serve` replicas on env, each on a free address,
// and waits until each answers; it returns their base URLs and processes.
func startServes(t *testing.T, env []string, n int) ([]string, []*process) {
	t.Helper()
	var urls []string
	var procs []*process
	for range n {
		addr := testkit.FreeAddr(t)
		procs = append(procs, start(t, append(slices.Clone(env), "APP_ADDR="+addr), "serve"))
		urls = append(urls, "http://"+addr)
	}
	for _, u := range urls {
		waitFor(t, u+"/healthz", "", http.StatusOK)
	}
	return urls, procs
}

// issueToken issues a token of the consumer acme that reads and writes
// licenses.
func issueToken(t *testing.T, env []string) string {
	t.Helper()
	return strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "acme", "--abilities", "licenses:read,licenses:write"))
}

// statusCounts counts the rows of table (the idempotency records, the
// webhook deliveries) by status.
func statusCounts(t *testing.T, db *testdb.DB, table string) map[string]int {
	t.Helper()
	var rows []struct {
		Status string
		N      int
	}
	if err := db.Gorm.Table(table).Select("status, count(*) AS n").Group("status").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out
}

// unsettled is how many intents are pending, processing or failed.
func unsettled(t *testing.T, db *testdb.DB) int {
	t.Helper()
	c := statusCounts(t, db, keysTable)
	return c[idempotency.StatusPending] + c["processing"] + c[idempotency.StatusFailed]
}

// licensesByDomain is every license row, by domain.
func licensesByDomain(t *testing.T, db *testdb.DB) map[string][]licenses.License {
	t.Helper()
	var lics []licenses.License
	if err := db.Gorm.Order("created_at").Find(&lics).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string][]licenses.License{}
	for _, l := range lics {
		out[l.Domain] = append(out[l.Domain], l)
	}
	return out
}

// wantOneLicensePerSite fails unless each domain has exactly one site at
// the vendor and exactly one license row, active and pointing at that site.
func wantOneLicensePerSite(t *testing.T, db *testdb.DB, sim *faultSim, domains []string) {
	t.Helper()
	lics := licensesByDomain(t, db)
	for _, d := range domains {
		sites := sim.sites(d)
		if len(sites) != 1 {
			t.Errorf("%s: the vendor holds %d sites, want 1: %v", d, len(sites), sites)
			continue
		}
		ls := lics[d]
		if len(ls) != 1 {
			t.Errorf("%s: %d license rows, want 1: %+v", d, len(ls), ls)
			continue
		}
		if l := ls[0]; l.Status != licenses.StatusActive || l.VendorSiteID != sites[0].ID {
			t.Errorf("%s: license %s is %s on site %s, want active on the vendor's site %s", d, l.ID, l.Status, l.VendorSiteID, sites[0].ID)
		}
	}
	if len(lics) != len(domains) {
		t.Errorf("license rows for %d domains, want %d", len(lics), len(domains))
	}
}

// vendorTap is an in-test HTTP proxy between serve and the simulator: it
// tells the test when a request of the route reaches it, then passes it
// on. A client that dies mid-request cancels the request to the simulator.
type vendorTap struct {
	srv     *httptest.Server
	arrived chan string // "METHOD /path" of each request, dropped when nobody listens
}

func newVendorTap(t *testing.T, sim *faultSim) *vendorTap {
	t.Helper()
	target, err := url.Parse(sim.url())
	if err != nil {
		t.Fatal(err)
	}
	tap := &vendorTap{arrived: make(chan string, 16)}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed client's request ends in "context canceled"
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case tap.arrived <- r.Method + " " + r.URL.Path:
		default:
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

// await waits for a request "METHOD /path" to reach the tap.
func (tap *vendorTap) await(t *testing.T, want string, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case got := <-tap.arrived:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %s reached the vendor within %s", want, within)
		}
	}
}

// licenseBody is the create body of a domain.
func licenseBody(domain string) string {
	return fmt.Sprintf(`{"name":"Fault %s","domain":"%s"}`, domain, domain)
}

// apiLicense is what the API shows of a license.
type apiLicense struct {
	ID           string `json:"id"`
	Domain       string `json:"domain"`
	LicenseKey   string `json:"license_key"`
	Status       string `json:"status"`
	VendorSiteID string `json:"vendor_site_id"`
}

// decodeLicense reads a {"data": license} body; the zero value when it
// is not one.
func decodeLicense(body string) apiLicense {
	var b struct {
		Data apiLicense `json:"data"`
	}
	_ = json.Unmarshal([]byte(body), &b)
	return b.Data
}
