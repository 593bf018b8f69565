package vendorproto_test

import (
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/internal/hmacsig"
)

// TestSignatureIsHmacsigs: Sign and Verify are internal/hmacsig's scheme
// (tested there), and their errors are its errors, so a caller's errors.Is
// holds against either package's names.
func TestSignatureIsHmacsigs(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","type":"site.suspended"}`)
	sig := vendorproto.Sign("whsec_s", now, body)
	if want := hmacsig.Sign("whsec_s", now, body); sig != want {
		t.Errorf("Sign = %s, want hmacsig's %s", sig, want)
	}
	for _, tt := range []struct {
		name    string
		secrets []string
		now     time.Time
		want    error
	}{
		{"good", []string{"whsec_s"}, now, nil},
		{"forged", []string{"whsec_other"}, now, vendorproto.ErrBadSignature},
		{"stale", []string{"whsec_s"}, now.Add(6 * time.Minute), vendorproto.ErrStale},
	} {
		err := vendorproto.Verify([]string{sig}, body, tt.secrets, tt.now, 5*time.Minute)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: Verify = %v, want %v", tt.name, err, tt.want)
		}
	}
	if vendorproto.ErrBadSignature != hmacsig.ErrBadSignature || vendorproto.ErrStale != hmacsig.ErrStale {
		t.Error("vendorproto's errors are not hmacsig's")
	}
}
