package vendorsim_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/app/vendorsim"
	"github.com/licensor-api/licensor/internal/testkit"
)

// delivery is one webhook POST a receiver got.
type delivery struct {
	contentType, signature string
	body                   []byte
}

// event is a delivery's body.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Site site `json:"site"`
	} `json:"data"`
}

// site is a site on the wire, as far as the tests look.
type site struct {
	ID, Domain, Status string
	LicenseKey         string `json:"license_key"`
}

func (d delivery) event(t *testing.T) event {
	t.Helper()
	var e event
	if err := json.Unmarshal(d.body, &e); err != nil {
		t.Fatalf("delivery body %s: %v", d.body, err)
	}
	return e
}

// receiver is a webhook endpoint that records every delivery and answers
// status(n) to the nth (from 1).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	status func(n int) int
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	t.Helper()
	rc := &receiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{r.Header.Get("Content-Type"), r.Header.Get("Vendor-Signature"), body})
		n := len(rc.got)
		rc.mu.Unlock()
		w.WriteHeader(rc.status(n))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func always(status int) func(int) int { return func(int) int { return status } }

const hookSecret = "whsec-t0p-s3cret"

// hookSim starts a simulator whose webhooks go to url with hookSecret, a
// clock that records the waits and returns at once unless hook sets its own, and n sites (site1.test…,
// whose ids siteID gives); Close runs at the end of the test.
func hookSim(t *testing.T, url string, n int, hook vendorsim.SimWebhook, opts vendorsim.SimOptions) *vendorsim.Simulator {
	t.Helper()
	hook.URL, hook.Secret = url, hookSecret
	if hook.Sleep == nil {
		hook.Sleep = testkit.NewClock(time.Time{}).Sleep
	}
	opts.Webhook = hook
	sim := newSim(t, opts)
	t.Cleanup(sim.Close)
	for i := 1; i <= n; i++ {
		if w := ask(sim, http.MethodPost, "/sites", createBody("site"+strconv.Itoa(i)+".test"), opts.Token); w.status != http.StatusCreated {
			t.Fatalf("create %d = %d %s", i, w.status, w.body.String())
		}
	}
	return sim
}

// idOf is the id of the domain's site, read from the simulator: ids are
// random, never site_1, site_2, ….
func idOf(t *testing.T, sim *vendorsim.Simulator, domain string) string {
	t.Helper()
	for _, site := range sim.Sites() {
		if site.Domain == domain {
			return site.ID
		}
	}
	t.Fatalf("no site for %s", domain)
	return ""
}

// siteID is the id of a hookSim's site n (from 1), site<n>.test's.
func siteID(t *testing.T, sim *vendorsim.Simulator, n int) string {
	t.Helper()
	return idOf(t, sim, "site"+strconv.Itoa(n)+".test")
}

// change asks POST /_sim/sites/{id}/{action} and fails the test unless it
// answers 200.
func change(t *testing.T, sim *vendorsim.Simulator, id, action, token string) *sink {
	t.Helper()
	w := ask(sim, http.MethodPost, "/_sim/sites/"+id+"/"+action, "", token)
	if w.status != http.StatusOK {
		t.Fatalf("%s %s = %d %s", action, id, w.status, w.body.String())
	}
	return w
}

// TestSimWebhookIsSigned: a suspend is delivered once as JSON, with the
// event the admin route answered and a Vendor-Signature computed here from
// the secret; the log names the event, never the secret or the signature.
func TestSimWebhookIsSigned(t *testing.T) {
	const token = "sim-token"
	rc := newReceiver(t, always(http.StatusNoContent))
	logs := &testkit.Buffer{}
	now := time.Unix(1_800_000_000, 0)
	sim := hookSim(t, rc.URL, 1, vendorsim.SimWebhook{Now: func() time.Time { return now }},
		vendorsim.SimOptions{Token: token, Log: slog.New(slog.NewTextHandler(logs, nil))})

	answered := change(t, sim, siteID(t, sim, 1), "suspend", token)
	// Delivered is counted as the delivery ends, Pending a moment later.
	testkit.Eventually(t, 10*time.Second, func() bool { st := statsOf(t, sim, token).Webhooks; return st.Delivered == 1 && st.Pending == 0 }, "delivered")
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	d := got[0]
	if d.contentType != "application/json" {
		t.Errorf("Content-Type %q", d.contentType)
	}
	if strings.TrimSpace(answered.body.String()) != string(d.body) {
		t.Errorf("delivered %s, but the route answered %s", d.body, answered.body.String())
	}
	e := d.event(t)
	if !strings.HasPrefix(e.ID, "evt_") || len(e.ID) < 10 || e.Type != "site.suspended" || e.Created != now.Unix() ||
		e.Data.Site.ID != siteID(t, sim, 1) || e.Data.Site.Status != "suspended" || e.Data.Site.Domain != "site1.test" ||
		!strings.HasPrefix(e.Data.Site.LicenseKey, "LK-") {
		t.Errorf("event %+v", e)
	}

	ts, v1, ok := strings.Cut(d.signature, ",v1=")
	if !ok || ts != "t="+strconv.FormatInt(now.Unix(), 10) {
		t.Fatalf("Vendor-Signature %q, want t=%d,v1=…", d.signature, now.Unix())
	}
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(strings.TrimPrefix(ts, "t=") + "." + string(d.body)))
	if want := hex.EncodeToString(mac.Sum(nil)); v1 != want {
		t.Errorf("v1 = %s, want HMAC-SHA256(secret, t.body) = %s", v1, want)
	}
	if got := vendorproto.Sign(hookSecret, now, d.body); got != d.signature {
		t.Errorf("Sign = %s, sent %s", got, d.signature)
	}

	if st := statsOf(t, sim, token).Webhooks; st != (vendorsim.WebhookStats{Sent: 1, Delivered: 1}) {
		t.Errorf("stats %+v, want one sent and delivered", st)
	}
	log := logs.String()
	for _, want := range []string{"event=" + e.ID, "type=site.suspended", "site=" + siteID(t, sim, 1), "status=204"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	for _, secret := range []string{hookSecret, v1, "LK-"} {
		if strings.Contains(log, secret) {
			t.Errorf("log holds %q:\n%s", secret, log)
		}
	}
}

// TestSimWebhookRetriesUntil2xx: a receiver that fails the first three
// deliveries gets the same event four times, the waits between doubling
// from RetryBase with at most half of each taken off as jitter.
func TestSimWebhookRetriesUntil2xx(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	clock := testkit.NewClock(time.Time{})
	sim := hookSim(t, rc.URL, 1, vendorsim.SimWebhook{RetryBase: 40 * time.Millisecond, Sleep: clock.Sleep},
		vendorsim.SimOptions{Seed: 3})

	change(t, sim, siteID(t, sim, 1), "rotate", "")
	testkit.Eventually(t, 10*time.Second, func() bool { return statsOf(t, sim, "").Webhooks.Delivered == 1 }, "delivered")
	got := rc.deliveries()
	if len(got) != 4 {
		t.Fatalf("%d deliveries, want 4", len(got))
	}
	for _, d := range got[1:] {
		if string(d.body) != string(got[0].body) {
			t.Errorf("a retry sent %s, the first %s", d.body, got[0].body)
		}
	}
	waits := clock.Waits()
	if len(waits) != 3 {
		t.Fatalf("waits %v, want 3", waits)
	}
	for i, w := range waits {
		step := 40 * time.Millisecond << i
		if w < step/2 || w > step {
			t.Errorf("wait %d = %s, want within [%s, %s]", i+1, w, step/2, step)
		}
	}
	if st := statsOf(t, sim, "").Webhooks; st != (vendorsim.WebhookStats{Sent: 4, Delivered: 1}) {
		t.Errorf("stats %+v, want 4 sent, 1 delivered", st)
	}
}

// TestSimWebhookGivesUp: a receiver that never answers 2xx, or cannot be
// reached, gets Attempts tries, the waits capped at RetryMax; then the
// delivery is failed.
func TestSimWebhookGivesUp(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connection refused: a transport error
	for name, url := range map[string]string{"500": newReceiver(t, always(500)).URL, "unreachable": gone.URL} {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(time.Time{})
			sim := hookSim(t, url, 1, vendorsim.SimWebhook{Attempts: 5, RetryBase: time.Second, RetryMax: 2 * time.Second,
				Sleep: clock.Sleep}, vendorsim.SimOptions{})
			change(t, sim, siteID(t, sim, 1), "delete", "")
			testkit.Eventually(t, 10*time.Second, func() bool { return statsOf(t, sim, "").Webhooks.Failed == 1 }, "failed")
			if st := statsOf(t, sim, "").Webhooks; st != (vendorsim.WebhookStats{Sent: 5, Failed: 1}) {
				t.Errorf("stats %+v, want 5 sent, 1 failed", st)
			}
			waits := clock.Waits()
			if len(waits) != 4 {
				t.Fatalf("waits %v, want 4", waits)
			}
			for _, w := range waits[1:] {
				if w < time.Second || w > 2*time.Second {
					t.Errorf("waits %v, want the later ones within [1s, 2s]", waits)
				}
			}
		})
	}
}

// TestSimWebhookDupRateOneSendsEachTwice: with --webhook-dup-rate 1 every
// event is delivered twice in a row, the same body both times.
func TestSimWebhookDupRateOneSendsEachTwice(t *testing.T) {
	rc := newReceiver(t, always(http.StatusOK))
	sim := hookSim(t, rc.URL, 3, vendorsim.SimWebhook{DupRate: 1}, vendorsim.SimOptions{})
	for _, id := range []string{siteID(t, sim, 1), siteID(t, sim, 2), siteID(t, sim, 3)} {
		change(t, sim, id, "suspend", "")
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return statsOf(t, sim, "").Webhooks.Delivered == 6 }, "delivered")
	got := rc.deliveries()
	if len(got) != 6 {
		t.Fatalf("%d deliveries, want 6", len(got))
	}
	for i := 0; i < 6; i += 2 {
		if string(got[i].body) != string(got[i+1].body) {
			t.Errorf("delivery %d %s is not followed by its duplicate: %s", i+1, got[i].body, got[i+1].body)
		}
		if e := got[i].event(t); e.Data.Site.ID != siteID(t, sim, i/2+1) {
			t.Errorf("delivery %d is of %s, want site%d.test's", i+1, e.Data.Site.ID, i/2+1)
		}
	}
	if st := statsOf(t, sim, "").Webhooks; st != (vendorsim.WebhookStats{Sent: 6, Delivered: 6}) {
		t.Errorf("stats %+v, want 6 sent and delivered", st)
	}
}

// TestSimWebhookShuffleIsSeeded: the events queued while the receiver is
// busy are delivered in the order they came, or with Shuffle in a random
// order that a seed fixes.
func TestSimWebhookShuffleIsSeeded(t *testing.T) {
	inOrder := []string{"site2.test", "site3.test", "site4.test", "site5.test", "site6.test", "site7.test"} // by domain: each run has its own ids
	order := func(shuffle bool, seed uint64) []string {
		t.Helper()
		busy, release := make(chan struct{}), make(chan struct{})
		rc := newReceiver(t, func(n int) int {
			if n == 1 {
				close(busy)
				<-release // the others queue up meanwhile
			}
			return http.StatusOK
		})
		sim := hookSim(t, rc.URL, 7, vendorsim.SimWebhook{Shuffle: shuffle}, vendorsim.SimOptions{Seed: seed})
		change(t, sim, siteID(t, sim, 1), "suspend", "")
		<-busy
		for _, d := range inOrder {
			change(t, sim, idOf(t, sim, d), "suspend", "")
		}
		close(release)
		testkit.Eventually(t, 10*time.Second, func() bool { return statsOf(t, sim, "").Webhooks.Delivered == 7 }, "delivered")
		var ids []string
		for _, d := range rc.deliveries()[1:] {
			ids = append(ids, d.event(t).Data.Site.Domain)
		}
		return ids
	}
	if got := order(false, 7); strings.Join(got, " ") != strings.Join(inOrder, " ") {
		t.Errorf("without shuffle: %v, want %v", got, inOrder)
	}
	first, again := order(true, 7), order(true, 7)
	if strings.Join(first, " ") != strings.Join(again, " ") {
		t.Errorf("seed 7 gave %v, then %v", first, again)
	}
	if strings.Join(first, " ") == strings.Join(inOrder, " ") {
		t.Errorf("shuffled with seed 7: %v, still in order", first)
	}
	if other := order(true, 8); strings.Join(other, " ") == strings.Join(first, " ") {
		t.Errorf("seeds 7 and 8 both gave %v", first)
	}
}

// TestSimSiteChangesShowInTheList: suspend, reactivate, rotate and delete
// change the sites GET /sites lists (and the state file), each answering
// its event even without a webhook URL; an unknown site or action, a
// change to what already is, or a wrong token changes nothing.
func TestSimSiteChangesShowInTheList(t *testing.T) {
	const token = "sim-token"
	state := t.TempDir() + "/sites.json"
	sim := hookSim(t, "", 4, vendorsim.SimWebhook{}, vendorsim.SimOptions{Token: token, StateFile: state})
	before := listed(t, sim, token)
	s1, s2, s3, s4 := siteID(t, sim, 1), siteID(t, sim, 2), siteID(t, sim, 3), siteID(t, sim, 4)

	for _, step := range []struct{ id, action, want string }{
		{s1, "suspend", "site.suspended"},
		{s2, "suspend", "site.suspended"},
		{s2, "reactivate", "site.reactivated"},
		{s3, "rotate", "site.key_rotated"},
		{s4, "delete", "site.deleted"},
	} {
		var e event
		if err := json.Unmarshal(change(t, sim, step.id, step.action, token).body.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type != step.want || e.Data.Site.ID != step.id {
			t.Errorf("%s %s answered %+v, want a %s of it", step.action, step.id, e, step.want)
		}
		if step.action == "delete" && e.Data.Site.Status != "active" {
			t.Errorf("the delete event holds %+v, want the site as it was", e.Data.Site)
		}
	}
	for _, bad := range []struct {
		target, token string
		want          int
	}{
		{"/_sim/sites/site_9/suspend", token, 404}, // an id never given
		{"/_sim/sites/" + s4 + "/rotate", token, 404},
		{"/_sim/sites/" + s1 + "/explode", token, 404},
		{"/_sim/sites/" + s1 + "/suspend", token, 409},
		{"/_sim/sites/" + s2 + "/reactivate", token, 409},
		{"/_sim/sites/" + s2 + "/suspend", "wrong", 401},
	} {
		if w := ask(sim, http.MethodPost, bad.target, "", bad.token); w.status != bad.want {
			t.Errorf("POST %s = %d %s, want %d", bad.target, w.status, w.body.String(), bad.want)
		}
	}

	after := listed(t, sim, token)
	if len(after) != 3 {
		t.Fatalf("listed %+v, want 3 sites: site4.test's deleted", after)
	}
	if after[0].Status != "suspended" || after[1].Status != "active" || after[2].Status != "active" {
		t.Errorf("statuses %s %s %s, want suspended active active", after[0].Status, after[1].Status, after[2].Status)
	}
	for i := range 3 {
		rotated := after[i].ID == s3
		if (after[i].LicenseKey != before[i].LicenseKey) != rotated {
			t.Errorf("%s key %s → %s; only site3.test's is rotated", after[i].ID, before[i].LicenseKey, after[i].LicenseKey)
		}
	}
	if st := statsOf(t, sim, token).Webhooks; st != (vendorsim.WebhookStats{}) {
		t.Errorf("without a URL: stats %+v, want none", st)
	}

	restarted := newSim(t, vendorsim.SimOptions{Token: token, StateFile: state})
	if again := listed(t, restarted, token); len(again) != 3 || again[0].Status != "suspended" || again[2].LicenseKey != after[2].LicenseKey {
		t.Errorf("after a restart: %+v, want the changes kept", again)
	}
}

// TestSimRotateKey: POST /sites/{id}/rotate-key answers the site with a new
// license key, keeps it (the list, the state file), counts the call and
// sends the site.key_rotated event a rotation on the vendor's side sends.
func TestSimRotateKey(t *testing.T) {
	rc := newReceiver(t, always(http.StatusOK))
	state := t.TempDir() + "/sites.json"
	sim := hookSim(t, rc.URL, 2, vendorsim.SimWebhook{}, vendorsim.SimOptions{StateFile: state})
	before := listed(t, sim, "")
	id := siteID(t, sim, 1)

	w := ask(sim, http.MethodPost, vendorproto.RotateKey.Path(id), "", "")
	var answer struct{ Data site }
	if err := json.Unmarshal(w.body.Bytes(), &answer); err != nil || w.status != http.StatusOK {
		t.Fatalf("rotate-key = %d %s, want 200 with the site", w.status, w.body.String())
	}
	if got := answer.Data; got.ID != id || got.Domain != "site1.test" || !strings.HasPrefix(got.LicenseKey, "LK-") || got.LicenseKey == before[0].LicenseKey {
		t.Errorf("rotated %+v, want site1.test with a key other than %s", got, before[0].LicenseKey)
	}
	if after := listed(t, sim, ""); after[0].LicenseKey != answer.Data.LicenseKey || after[1] != before[1] {
		t.Errorf("listed %+v, want site1.test's new key alone", after)
	}
	if again := listed(t, newSim(t, vendorsim.SimOptions{StateFile: state}), ""); again[0].LicenseKey != answer.Data.LicenseKey {
		t.Errorf("after a restart %+v, want the new key kept", again)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return statsOf(t, sim, "").Webhooks.Delivered == 1 }, "delivered")
	got := rc.deliveries()
	if e := got[0].event(t); len(got) != 1 || e.Type != vendorproto.EventSiteKeyRotated || e.Data.Site != answer.Data {
		t.Errorf("%d deliveries, the first %+v; want one site.key_rotated of %+v", len(got), e, answer.Data)
	}
	if calls := statsOf(t, sim, "").Calls["POST /sites/{id}/rotate-key"]; !reflect.DeepEqual(calls, map[string]int{"200": 1}) {
		t.Errorf("counted %v, want a 200", calls)
	}
}

// listed reads the first page of GET /sites.
func listed(t *testing.T, sim *vendorsim.Simulator, token string) []site {
	t.Helper()
	w := ask(sim, http.MethodGet, "/sites?page=1", "", token)
	var out struct{ Data []site }
	if err := json.Unmarshal(w.body.Bytes(), &out); err != nil || w.status != 200 {
		t.Fatalf("GET /sites?page=1 = %d %s", w.status, w.body.String())
	}
	return out.Data
}

// TestSimCloseStopsTheDeliveries: Close returns while a delivery hangs,
// cancelling it, and a change after Close sends nothing.
func TestSimCloseStopsTheDeliveries(t *testing.T) {
	hung, release := make(chan struct{}), make(chan struct{})
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a client that hangs up only once the body is read
		close(hung)
		select { // until the client hangs up, or the test ends (the server's Close waits for this handler)
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer rc.Close()
	defer close(release)
	sim := hookSim(t, rc.URL, 2, vendorsim.SimWebhook{}, vendorsim.SimOptions{})
	change(t, sim, siteID(t, sim, 1), "suspend", "")
	<-hung
	closed := make(chan struct{})
	go func() { sim.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a delivery hung")
	}
	change(t, sim, siteID(t, sim, 2), "suspend", "")
	if st := statsOf(t, sim, "").Webhooks; st.Sent != 1 || st.Delivered != 0 {
		t.Errorf("stats %+v, want the one hung attempt", st)
	}
}
