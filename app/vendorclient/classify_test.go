package vendorclient_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/testkit"
)

// callVendor makes one of the calls: "list", "create", "rotate" or "delete".
func callVendor(ctx context.Context, v licenses.Vendor, call string) error {
	switch call {
	case "list":
		_, err := v.FindSite(ctx, "acme.test")
		return err
	case "create":
		_, err := v.CreateSite(ctx, "Acme", "acme.test")
		return err
	case "rotate":
		_, err := v.RotateKey(ctx, "site_1")
		return err
	}
	return v.DeleteSite(ctx, "site_1")
}

// TestFailureClassification is vendor.md's table: every answer but a 429 is
// made once, a read that fails is unavailable, a write that was sent and
// failed is uncertain, and a 4xx is rejected.
func TestFailureClassification(t *testing.T) {
	big := `{"data":[],"padding":"` + strings.Repeat("x", 1<<20) + `"}`
	noKey := `{"id":"site_1","name":"Acme","domain":"acme.test","status":"active"}`
	tests := []struct {
		name string
		call string
		step http.HandlerFunc
		want error
	}{
		{"list 500", "list", respond(http.StatusInternalServerError, `{"message":"boom"}`), licenses.ErrVendorUnavailable},
		{"create 500", "create", respond(http.StatusInternalServerError, `{"message":"boom"}`), licenses.ErrVendorUncertain},
		{"delete 503", "delete", respond(http.StatusServiceUnavailable, ""), licenses.ErrVendorUncertain},
		{"list 401", "list", respond(http.StatusUnauthorized, `{"message":"Unauthenticated."}`), licenses.ErrVendorRejected},
		{"create 422", "create", respond(http.StatusUnprocessableEntity, `{"message":"bad"}`), licenses.ErrVendorRejected},
		{"delete 403", "delete", respond(http.StatusForbidden, "nope"), licenses.ErrVendorRejected},
		{"list site without license_key", "list", respond(http.StatusOK, `{"data":[`+noKey+`]}`), licenses.ErrVendorUnavailable},
		{"list not JSON", "list", respond(http.StatusOK, `<html>oops</html>`), licenses.ErrVendorUnavailable},
		{"list without data", "list", respond(http.StatusOK, `{}`), licenses.ErrVendorUnavailable},
		{"list over 1 MiB", "list", respond(http.StatusOK, big), licenses.ErrVendorUnavailable},
		{"create site without license_key", "create", respond(http.StatusCreated, `{"data":`+noKey+`}`), licenses.ErrVendorUncertain},
		{"create site without id", "create", respond(http.StatusCreated, `{"data":{"license_key":"LK-1"}}`), licenses.ErrVendorUncertain},
		{"create not JSON", "create", respond(http.StatusCreated, `oops`), licenses.ErrVendorUncertain},
		{"create over 1 MiB", "create", respond(http.StatusCreated, big), licenses.ErrVendorUncertain},
		{"create 200 instead of 201", "create", created200(), licenses.ErrVendorUncertain},
		{"create redirected, not followed", "create", respond(http.StatusFound, "", "Location", "/elsewhere"), licenses.ErrVendorUncertain},
		{"rotate 500", "rotate", respond(http.StatusInternalServerError, `{"message":"boom"}`), licenses.ErrVendorUncertain},
		{"rotate 409", "rotate", respond(http.StatusConflict, `{"message":"bad"}`), licenses.ErrVendorRejected},
		{"rotate site without license_key", "rotate", respond(http.StatusOK, `{"data":`+noKey+`}`), licenses.ErrVendorUncertain},
		{"rotate 201 instead of 200", "rotate", created201, licenses.ErrVendorUncertain},
		{"rotate reset", "rotate", reset, licenses.ErrVendorUncertain},
		{"list reset", "list", reset, licenses.ErrVendorUnavailable},
		{"create reset", "create", reset, licenses.ErrVendorUncertain},
		{"delete reset", "delete", reset, licenses.ErrVendorUncertain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stub(t, tt.step)
			d, _, _ := newDriver(t, testConfig(s.URL))
			wantClass(t, callVendor(context.Background(), d, tt.call), tt.want)
			s.assertSentCount(t, 1)
		})
	}
}

func created200() http.HandlerFunc {
	return respond(http.StatusOK, `{"data":`+siteBody("site_1", "acme.test", "LK-1")+`}`)
}

// TestRejectionCarriesTheVendorsWords: a 422 keeps the vendor's message and
// field errors; a refusal without a JSON body gets the status text.
func TestRejectionCarriesTheVendorsWords(t *testing.T) {
	tests := []struct {
		name string
		step http.HandlerFunc
		want licenses.RejectedError
	}{
		{
			name: "422 with field errors",
			step: respond(http.StatusUnprocessableEntity, `{"message":"The domain is invalid.","errors":{"domain":["The domain must be a valid domain."]}}`),
			want: licenses.RejectedError{Status: 422, Message: "The domain is invalid.",
				Fields: map[string][]string{"domain": {"The domain must be a valid domain."}}},
		},
		{
			name: "403 without a body",
			step: respond(http.StatusForbidden, ""),
			want: licenses.RejectedError{Status: 403, Message: "Forbidden"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stub(t, tt.step)
			d, _, _ := newDriver(t, testConfig(s.URL))
			_, err := d.CreateSite(context.Background(), "Acme", "acme.test")
			var got *licenses.RejectedError
			if !errors.As(err, &got) {
				t.Fatalf("err = %v, want *licenses.RejectedError", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// TestTimeouts: VENDOR_TIMEOUT ends a call the vendor never answers. A read
// is unavailable; a write was sent, so it is uncertain. Neither is retried.
func TestTimeouts(t *testing.T) {
	for call, want := range map[string]error{
		"list":   licenses.ErrVendorUnavailable,
		"create": licenses.ErrVendorUncertain,
		"delete": licenses.ErrVendorUncertain,
		"rotate": licenses.ErrVendorUncertain,
	} {
		t.Run(call, func(t *testing.T) {
			s := stub(t, hang)
			cfg := testConfig(s.URL)
			cfg.Timeout = 50 * time.Millisecond
			d, _, _ := newDriver(t, cfg)
			err := callVendor(context.Background(), d, call)
			wantClass(t, err, want)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
			}
			s.assertSentCount(t, 1)
		})
	}
}

// TestNothingSentIsUnavailable: when the request cannot leave (connection
// refused, a TLS handshake that fails), even a write is definite: unavailable.
func TestNothingSentIsUnavailable(t *testing.T) {
	refused := "http://" + testkit.FreeAddr(t)

	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request reached the server past a failed handshake: %s %s", r.Method, r.URL)
	}))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)

	for name, url := range map[string]string{"connection refused": refused, "TLS handshake fails": untrusted.URL} {
		for _, call := range []string{"list", "create", "delete", "rotate"} {
			t.Run(name+"/"+call, func(t *testing.T) {
				d, _, _ := newDriver(t, testConfig(url))
				wantClass(t, callVendor(context.Background(), d, call), licenses.ErrVendorUnavailable)
			})
		}
	}
}
