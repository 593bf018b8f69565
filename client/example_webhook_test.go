package client_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/licensor-api/licensor/client"
)

// A receiver of licensor's webhooks: it verifies the raw body, drops a
// duplicate by event id, answers at once, and does the work afterwards,
// where an event older than the last one of its license is dropped too.
func ExampleVerifyWebhook() {
	secret := "whsec_…" // the endpoint's signing secret, shown once when the endpoint was created

	var (
		mu   sync.Mutex
		seen = map[string]bool{} // event ids taken; a real receiver stores them (and the event) durably
	)
	work := make(chan client.Event, 100)
	receive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		// The raw bytes, before any decoding: the signature is over them.
		if err := client.VerifyWebhook(secret, r.Header.Get(client.SignatureHeader), body, 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // client.ErrBadSignature or client.ErrStaleSignature
			return
		}
		var ev client.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[ev.ID] { // a duplicate is answered 200 too, so that licensor stops resending it
			select {
			case work <- ev:
				seen[ev.ID] = true
			default:
				http.Error(w, "busy", http.StatusServiceUnavailable) // not taken: licensor sends it again later
				return
			}
		}
		w.WriteHeader(http.StatusOK) // within seconds: the work is done afterwards
	})

	// licensor's side, for the example: a revoke, its redelivery, a forgery,
	// and a suspension that was sent before the revoke but arrives after it.
	revoked := `{"id":"evt_2","type":"license.revoked","created_at":"2026-11-30T10:05:00Z","data":{"license":{"id":"01J","status":"revoked"}},"sequence":2}`
	suspended := `{"id":"evt_1","type":"license.suspended","created_at":"2026-11-30T10:00:00Z","data":{"license":{"id":"01J","status":"suspended"}},"sequence":1}`
	for _, d := range []struct{ secret, body string }{{secret, revoked}, {secret, revoked}, {"whsec_forged", revoked}, {secret, suspended}} {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/licensor", strings.NewReader(d.body))
		req.Header.Set(client.SignatureHeader, sign(d.secret, time.Now(), d.body))
		rec := httptest.NewRecorder()
		receive(rec, req)
		fmt.Println(rec.Code)
	}
	close(work)

	last := map[string]uint64{} // per license, the sequence of the last event applied
	for ev := range work {
		lic, err := ev.License()
		if err != nil { // client.ErrNoLicense: e.g. client.EventWebhookEndpointDisabled
			continue
		}
		if ev.Sequence <= last[lic.ID] {
			fmt.Println("stale:", ev.Type, ev.Sequence)
			continue
		}
		last[lic.ID] = ev.Sequence
		fmt.Println("applied:", ev.Type, lic.ID, lic.Status)
	}
	// Output:
	// 200
	// 200
	// 401
	// 200
	// applied: license.revoked 01J revoked
	// stale: license.suspended 1
}

// sign is what licensor puts in the Licensor-Signature header:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func sign(secret string, t time.Time, body string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + body))
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
