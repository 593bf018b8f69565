package tests

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

const formType = "application/x-www-form-urlencoded"

// form is headers plus the urlencoded Content-Type.
func form(headers []string) []string { return append([]string{"Content-Type", formType}, headers...) }

// multipartBody is a multipart/form-data body of the fields (name, value
// pairs) and its Content-Type; a name starting with "file:" is a file part.
func multipartBody(t *testing.T, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		var err error
		if name, ok := strings.CutPrefix(fields[i], "file:"); ok {
			var fw io.Writer
			if fw, err = w.CreateFormFile(name, "logo.png"); err == nil {
				_, err = fw.Write([]byte(fields[i+1]))
			}
		} else {
			err = w.WriteField(fields[i], fields[i+1])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

// jsonCreateFingerprint is the fingerprint of {"name":"Acme","domain":"acme.test"}
// sent as JSON to POST /api/licenses, computed before forms were read: a
// stored record's retry must still match it.
const jsonCreateFingerprint = "382d480177697d4e664ed563521ad5c7f2557c43ab5c2c115acd7550098c9c42"

// globexCreateFingerprint is the fingerprint of the JSON create of
// {"name":"Globex","domain":"globex.test"}, as jsonCreateFingerprint is Acme's.
const globexCreateFingerprint = "6e93a82289a8034cd18506a42397f401fe8a18664f0f643cfbba890bbfb9e336"

// A create sent as a form (urlencoded or multipart) is read like JSON, and
// is the same intent: its fingerprint is the JSON one, so a retry that
// switches encoding is a replay, not 422 idempotency_key_reused; a JSON
// create's fingerprint is what it was.
func TestFormCreateIsTheSameIntentAsJSON(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")

		first := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "form-1")...).wantStatus(http.StatusCreated)
		if got := a.record("form-1").RequestHash; got != jsonCreateFingerprint {
			t.Errorf("a JSON create's fingerprint = %s, want %s as before", got, jsonCreateFingerprint)
		}
		calls := a.vendor.count("")
		r := a.do(http.MethodPost, "/api/licenses", "domain=ACME.test.&name=Acme&extra=1", form(keyed(acme, "form-1"))...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" || r.Body.String() != first.Body.String() {
			t.Errorf("a form retry of a JSON create is not its replay: %v %s", r.Header(), r.Body.String())
		}
		body, ct := multipartBody(t, "name", "Acme", "domain", "acme.test", "file:logo", "PNG")
		r = a.do(http.MethodPost, "/api/licenses", body, append(keyed(acme, "form-1"), "Content-Type", ct)...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("a multipart retry of a JSON create is not its replay: %s", r.Body.String())
		}
		if n := a.vendor.count(""); n != calls {
			t.Errorf("the vendor was called %d more times by the retries", n-calls)
		}

		// A form first, then JSON: one intent too, with the JSON fingerprint.
		globex := a.consumer("globex")
		made := a.do(http.MethodPost, "/api/licenses", "name=Globex&domain=globex.test", form(keyed(globex, "form-2"))...).wantStatus(http.StatusCreated).licenseData()
		if made["name"] != "Globex" || made["domain"] != "globex.test" {
			t.Errorf("form create made %v", made)
		}
		a.do(http.MethodPost, "/api/licenses", `{"domain":"globex.test","name":"Globex"}`, keyed(globex, "form-2")...).wantStatus(http.StatusCreated)
		if rec := a.record("form-2"); rec.RequestHash != globexCreateFingerprint {
			t.Errorf("a form create's fingerprint is not its JSON intent's")
		}
		a.do(http.MethodPost, "/api/licenses", "name=Other&domain=globex.test", form(keyed(globex, "form-2"))...).wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
}

// A form's values are strings and its arrays are PHP's: type mismatches,
// invalid UTF-8, a file part where a string is read, a form that cannot
// be parsed and one over the body limit are refused as their JSON
// counterparts are, with Laravel's messages.
func TestFormBodiesAreCheckedLikeJSON(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := form(a.consumer("acme"))
		for body, want := range map[string]map[string]any{
			"name[]=Acme&domain=acme.test":  {"name": []any{"The name field must be a string."}},
			"name[a]=Acme&domain=acme.test": {"name": []any{"The name field must be a string."}},
			"name=%FF&domain=acme.test":     {"name": []any{"The name field must be valid UTF-8."}},
			"name=Acme":                     {"domain": []any{"The domain field is required."}},
			"":                              {"name": []any{"The name field is required."}, "domain": []any{"The domain field is required."}},
		} {
			got := a.do(http.MethodPost, "/api/licenses", body, acme...).wantError(http.StatusUnprocessableEntity, "")["errors"]
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q: errors %v, want %v", body, got, want)
			}
		}
		mp, ct := multipartBody(t, "file:name", "PNG", "domain", "acme.test")
		got := a.do(http.MethodPost, "/api/licenses", mp, append(a.consumer("acme"), "Content-Type", ct)...).wantError(http.StatusUnprocessableEntity, "")["errors"]
		if !reflect.DeepEqual(got, map[string]any{"name": []any{"The name field must be a string."}}) {
			t.Errorf("a file part as name: errors %v", got)
		}
		a.do(http.MethodPost, "/api/licenses", "name=x", append(a.consumer("acme"), "Content-Type", "multipart/form-data")...).wantError(http.StatusBadRequest, "malformed_json")
		a.do(http.MethodPost, "/api/licenses", "--x\r\nbroken", append(a.consumer("acme"), "Content-Type", "multipart/form-data; boundary=x")...).wantError(http.StatusBadRequest, "malformed_json")
		big := "name=Acme&domain=acme.test&pad=" + strings.Repeat("a", 65<<10)
		a.do(http.MethodPost, "/api/licenses", big, acme...).wantError(http.StatusRequestEntityTooLarge, "payload_too_large")
		mpBig, ct := multipartBody(t, "name", "Acme", "domain", "acme.test", "file:logo", strings.Repeat("a", 65<<10))
		a.do(http.MethodPost, "/api/licenses", mpBig, append(a.consumer("acme"), "Content-Type", ct)...).wantError(http.StatusRequestEntityTooLarge, "payload_too_large")
		a.do(http.MethodPost, "/api/licenses", "name=Acme&domain=acme.test", append(a.consumer("acme"), "Content-Type", "text/plain")...).wantError(http.StatusUnsupportedMediaType, "unsupported_media_type")
		if n := a.vendor.count(""); n != 0 {
			t.Errorf("refused forms reached the vendor %d times", n)
		}
	})
}

// POST /api/tokens and POST /api/intents/{id}/discard read forms too:
// abilities[]=a&abilities[]=b and abilities[0]=a&abilities[1]=b are the
// array, a plain abilities=a is "must be an array".
func TestFormsOnEveryBodyRoute(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := form(bearer(a.token("root", auth.All)))
		for _, body := range []string{
			"consumer=globex&abilities[]=licenses:read&abilities[]=licenses:write",
			"consumer=globex&abilities%5B0%5D=licenses:read&abilities%5B1%5D=licenses:write",
		} {
			data := a.do(http.MethodPost, "/api/tokens", body, root...).wantStatus(http.StatusCreated).json()["data"].(map[string]any)
			if !reflect.DeepEqual(data["abilities"], []any{auth.LicensesRead, auth.LicensesWrite}) || data["consumer"] != "globex" {
				t.Errorf("%q issued %v", body, data)
			}
		}
		got := a.do(http.MethodPost, "/api/tokens", "consumer=globex&abilities=licenses:read", root...).wantError(http.StatusUnprocessableEntity, "")["errors"]
		if !reflect.DeepEqual(got, map[string]any{"abilities": []any{"The abilities field must be an array."}}) {
			t.Errorf("abilities as a string: errors %v", got)
		}

		a.plantRecord("acme", "form-3", acmeBody, idempotency.StatusFailed, -1)
		id := ptr.Deref(a.record("form-3").PublicID)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", "reason=", root...).wantError(http.StatusUnprocessableEntity, "")
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", "reason=customer+asked", root...).wantStatus(http.StatusOK)
		events := a.intentEvents(bearer(a.token("ops", auth.All)), id)
		if len(events) != 1 || events[0]["reason"] != "customer asked" {
			t.Errorf("discard by form: events %v, want one with the reason", events)
		}
	})
}

// A create sent as a form whose answer was lost is finished by the
// reconciler like a JSON one: the record keeps the request as the JSON it
// was read as, so Resume can read it back, and a JSON retry replays it.
func TestFormCreateLeftPendingIsReconciled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withClock(testkit.NewClock(time.Now())))
		acme := keyed(a.consumer("acme"), "form-4")
		mp, ct := multipartBody(t, "name", "Acme", "domain", "acme.test")
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		a.do(http.MethodPost, "/api/licenses", mp, append(acme, "Content-Type", ct)...).wantError(http.StatusAccepted, "operation_pending")
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" || r.licenseData()["domain"] != "acme.test" {
			t.Errorf("the JSON retry of a reconciled form create: %v %s", r.Header(), r.Body.String())
		}
	})
}
