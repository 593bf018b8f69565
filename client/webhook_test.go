package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	hookSecret = "whsec_t3st-s3cret"
	// hookBody is an event as licensor sends it.
	hookBody = `{"id":"evt_01JTEST","type":"license.suspended","created_at":"2026-11-30T10:00:01.5Z",` +
		`"data":{"license":{"id":"01JTEST","name":"Acme","domain":"acme.test","license_key":"LK-1","status":"suspended",` +
		`"vendor_site_id":"site_1","created_at":"2026-11-30T10:00:00.123456Z","updated_at":"2026-11-30T10:00:01.5Z"}},"sequence":3}`
)

// v1 is the hex HMAC-SHA256 of "<t>.<body>" under secret, computed here from
// the scheme's definition rather than by the package.
func v1(secret string, t time.Time, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t.Unix(), 10) + "." + body))
	return hex.EncodeToString(m.Sum(nil))
}

// sigHeader is a Licensor-Signature value of body at t, one v1 per secret.
func sigHeader(t time.Time, body string, secrets ...string) string {
	h := "t=" + strconv.FormatInt(t.Unix(), 10)
	for _, s := range secrets {
		h += ",v1=" + v1(s, t, body)
	}
	return h
}

// TestVerifyWebhook: a signature of the body under the secret verifies;
// a forged one, or none, is ErrBadSignature; a good one too old or too far
// ahead is ErrStaleSignature.
func TestVerifyWebhook(t *testing.T) {
	now := time.Now()
	good := sigHeader(now, hookBody, hookSecret)
	oneByte := strings.Replace(hookBody, `"sequence":3`, `"sequence":4`, 1)
	altered := []byte(good)
	if altered[len(altered)-1] == '0' { // flip the last hex digit of v1
		altered[len(altered)-1] = '1'
	} else {
		altered[len(altered)-1] = '0'
	}
	for _, tt := range []struct {
		name, secret, header, body string
		want                       error
	}{
		{"good", hookSecret, good, hookBody, nil},
		{"two v1, one good: the good one wins", hookSecret, sigHeader(now, hookBody, "whsec_other", hookSecret), hookBody, nil},
		{"a minute ahead", hookSecret, sigHeader(now.Add(time.Minute), hookBody, hookSecret), hookBody, nil},

		{"wrong secret", hookSecret, sigHeader(now, hookBody, "whsec_forged"), hookBody, ErrBadSignature},
		{"body changed by one byte", hookSecret, good, oneByte, ErrBadSignature},
		{"v1 altered", hookSecret, string(altered), hookBody, ErrBadSignature},
		{"missing header", hookSecret, "", hookBody, ErrBadSignature},
		{"no v1", hookSecret, "t=" + strconv.FormatInt(now.Unix(), 10), hookBody, ErrBadSignature},
		{"two v1, neither good", hookSecret, sigHeader(now, hookBody, "whsec_a", "whsec_b"), hookBody, ErrBadSignature},
		{"an empty secret, with a signature under it", "", sigHeader(now, hookBody, ""), hookBody, ErrBadSignature},
		{"stale and forged: bad, not stale", hookSecret, sigHeader(now.Add(-time.Hour), hookBody, "whsec_forged"), hookBody, ErrBadSignature},

		{"an hour old", hookSecret, sigHeader(now.Add(-time.Hour), hookBody, hookSecret), hookBody, ErrStaleSignature},
		{"ten minutes ahead", hookSecret, sigHeader(now.Add(10*time.Minute), hookBody, hookSecret), hookBody, ErrStaleSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyWebhook(tt.secret, tt.header, []byte(tt.body), time.Minute+30*time.Second)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("VerifyWebhook(%q) = %v, want %v", tt.header, err, tt.want)
			}
			if tt.want != nil && strings.Contains(err.Error(), tt.secret) && tt.secret != "" {
				t.Errorf("the error %q shows the secret", err)
			}
		})
	}
}

// TestVerifyWebhookTolerance: the tolerance is the caller's, and none (≤ 0)
// is 5 minutes.
func TestVerifyWebhookTolerance(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name      string
		age       time.Duration
		tolerance time.Duration
		want      error
	}{
		{"4 minutes old, no tolerance given", 4 * time.Minute, 0, nil},
		{"6 minutes old, no tolerance given", 6 * time.Minute, 0, ErrStaleSignature},
		{"6 minutes old, a negative tolerance", 6 * time.Minute, -time.Second, ErrStaleSignature},
		{"4 minutes ahead, no tolerance given", -4 * time.Minute, 0, nil},
		{"6 minutes ahead, no tolerance given", -6 * time.Minute, 0, ErrStaleSignature},
		{"6 minutes old, 10 minutes' tolerance", 6 * time.Minute, 10 * time.Minute, nil},
		{"2 minutes old, 1 minute's tolerance", 2 * time.Minute, time.Minute, ErrStaleSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyWebhook(hookSecret, sigHeader(now.Add(-tt.age), hookBody, hookSecret), []byte(hookBody), tt.tolerance)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("VerifyWebhook = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestEventDecodes: an event's fields and its license come out of the body
// licensor sends.
func TestEventDecodes(t *testing.T) {
	var ev Event
	if err := json.Unmarshal([]byte(hookBody), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != "evt_01JTEST" || ev.Type != EventLicenseSuspended || ev.Sequence != 3 ||
		!ev.CreatedAt.Equal(time.Date(2026, 11, 30, 10, 0, 1, 500_000_000, time.UTC)) {
		t.Errorf("event = %+v", ev)
	}
	lic, err := ev.License()
	if err != nil {
		t.Fatalf("License: %v", err)
	}
	want := License{ID: "01JTEST", Name: "Acme", Domain: "acme.test", LicenseKey: "LK-1", Status: "suspended", VendorSiteID: "site_1",
		CreatedAt: time.Date(2026, 11, 30, 10, 0, 0, 123_456_000, time.UTC), UpdatedAt: time.Date(2026, 11, 30, 10, 0, 1, 500_000_000, time.UTC)}
	if !lic.CreatedAt.Equal(want.CreatedAt) || !lic.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("license times = %v, %v; want %v, %v", lic.CreatedAt, lic.UpdatedAt, want.CreatedAt, want.UpdatedAt)
	}
	lic.CreatedAt, lic.UpdatedAt, want.CreatedAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if lic != want {
		t.Errorf("license = %+v, want %+v", lic, want)
	}
}

// TestEventWithoutLicense: an event that carries no license (an endpoint
// disabled, no data, a null license) is ErrNoLicense; a license that is not
// one is an error of its own.
func TestEventWithoutLicense(t *testing.T) {
	for _, body := range []string{
		`{"id":"evt_2","type":"webhook_endpoint.disabled","data":{"webhook_endpoint":{"id":"we_1","url":"https://acme.test/hooks"}},"sequence":1}`,
		`{"id":"evt_3","type":"license.revoked"}`,
		`{"id":"evt_4","type":"license.revoked","data":null}`,
		`{"id":"evt_5","type":"license.revoked","data":{"license":null}}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatal(err)
		}
		if _, err := ev.License(); !errors.Is(err, ErrNoLicense) {
			t.Errorf("%s: License() = %v, want ErrNoLicense", body, err)
		}
	}
	ev := Event{ID: "evt_6", Type: EventLicenseCreated, Data: json.RawMessage(`{"license":"LK-1"}`)}
	if _, err := ev.License(); err == nil || errors.Is(err, ErrNoLicense) {
		t.Errorf("a license that is a string: License() = %v, want a decode error", err)
	}
}
