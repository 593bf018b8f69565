package hmacsig_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/hmacsig"
)

const tolerance = 5 * time.Minute

// signature is the header value of body at t under each secret, computed
// here from the scheme's definition rather than by Sign.
func signature(t time.Time, body string, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	h := "t=" + ts
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + body))
		h += ",v1=" + hex.EncodeToString(mac.Sum(nil))
	}
	return h
}

// TestSignIsTheStripeScheme: Sign writes t, the Unix seconds, and v1, the
// hex HMAC-SHA256 of t + "." + the raw body.
func TestSignIsTheStripeScheme(t *testing.T) {
	now := time.Unix(1_800_000_000, 999_000_000) // the fraction is not signed
	body := []byte(`{"id":"evt_1"}`)
	got := hmacsig.Sign("whsec-t0p-s3cret", now, body)
	if want := signature(time.Unix(1_800_000_000, 0), string(body), "whsec-t0p-s3cret"); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if err := hmacsig.Verify([]string{got}, body, []string{"whsec-t0p-s3cret"}, now, tolerance); err != nil {
		t.Errorf("Verify(Sign(…)) = %v", err)
	}
}

// TestVerify: only a signature under one of the secrets is accepted;
// forged, missing, malformed or stale ones are refused, a stale one only
// once its signature matched; during a rotation either secret signs; an
// empty secret, which anyone can MAC under, signs nothing.
func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := `{"id":"evt_sig","type":"site.suspended"}`
	secrets := []string{"whsec_new", "whsec_old"}
	good := signature(now, body, "whsec_new")
	for _, tt := range []struct {
		name    string
		headers []string
		body    string
		secrets []string
		want    error
	}{
		{"signed with the new secret", []string{good}, body, secrets, nil},
		{"an empty secret beside the one that signed", []string{good}, body, []string{"", "whsec_new"}, nil},
		{"signed with the old secret, during a rotation", []string{signature(now, body, "whsec_unknown", "whsec_old")}, body, secrets, nil},
		{"spaces around the parts", []string{" t=" + strconv.FormatInt(now.Unix(), 10) + " , v1=" + good[len("t=1800000000,v1="):]}, body, secrets, nil},
		{"unknown parts ignored", []string{good + ",v0=abc,scheme=x"}, body, secrets, nil},
		{"a v1 that is not a hex SHA-256 ignored beside a good one", []string{"v1=zz,v1=00," + good}, body, secrets, nil},
		{"just within the tolerance, past", []string{signature(now.Add(-tolerance), body, "whsec_new")}, body, secrets, nil},
		{"just within the tolerance, future", []string{signature(now.Add(tolerance), body, "whsec_new")}, body, secrets, nil},

		{"no header", nil, body, secrets, hmacsig.ErrBadSignature},
		{"an empty header", []string{""}, body, secrets, hmacsig.ErrBadSignature},
		{"two headers", []string{good, good}, body, secrets, hmacsig.ErrBadSignature},
		{"forged", []string{signature(now, body, "whsec_forged")}, body, secrets, hmacsig.ErrBadSignature},
		{"malformed", []string{"t=x,v1=00"}, body, secrets, hmacsig.ErrBadSignature},
		{"a part without =", []string{good + ",junk"}, body, secrets, hmacsig.ErrBadSignature},
		{"no t", []string{good[len("t=1800000000,"):]}, body, secrets, hmacsig.ErrBadSignature},
		{"no v1", []string{"t=" + strconv.FormatInt(now.Unix(), 10)}, body, secrets, hmacsig.ErrBadSignature},
		{"a v1 too short", []string{good[:len(good)-2]}, body, secrets, hmacsig.ErrBadSignature},
		{"tampered body", []string{good}, `{"id":"evt_sig","type":"site.deleted"}`, secrets, hmacsig.ErrBadSignature},
		{"another t than signed", []string{"t=" + strconv.FormatInt(now.Unix()+1, 10) + good[len("t=1800000000"):]}, body, secrets, hmacsig.ErrBadSignature},
		{"no secret configured", []string{good}, body, nil, hmacsig.ErrBadSignature},
		{"an empty secret signs nothing", []string{signature(now, body, "")}, body, []string{""}, hmacsig.ErrBadSignature},
		{"an empty secret beside a real one signs nothing", []string{signature(now, body, "")}, body, []string{"", "whsec_new"}, hmacsig.ErrBadSignature},
		{"stale and forged: bad, not stale", []string{signature(now.Add(-6*time.Minute), body, "whsec_forged")}, body, secrets, hmacsig.ErrBadSignature},

		{"stale", []string{signature(now.Add(-6*time.Minute), body, "whsec_new")}, body, secrets, hmacsig.ErrStale},
		{"from the future", []string{signature(now.Add(6*time.Minute), body, "whsec_new")}, body, secrets, hmacsig.ErrStale},
		{"a second past the tolerance", []string{signature(now.Add(-tolerance-time.Second), body, "whsec_old")}, body, secrets, hmacsig.ErrStale},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := hmacsig.Verify(tt.headers, []byte(tt.body), tt.secrets, now, tolerance)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Verify(%q) = %v, want %v", tt.headers, err, tt.want)
			}
		})
	}
}

// TestVerifyTakesTheToleranceGiven: the tolerance is the caller's.
func TestVerifyTakesTheToleranceGiven(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{}`)
	sig := hmacsig.Sign("s", now.Add(-time.Minute), body)
	if err := hmacsig.Verify([]string{sig}, body, []string{"s"}, now, 2*time.Minute); err != nil {
		t.Errorf("a minute old, 2m tolerance: %v", err)
	}
	if err := hmacsig.Verify([]string{sig}, body, []string{"s"}, now, 30*time.Second); !errors.Is(err, hmacsig.ErrStale) {
		t.Errorf("a minute old, 30s tolerance: %v, want ErrStale", err)
	}
}
