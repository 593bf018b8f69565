package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// issueFor issues a token through the API as root and returns the response.
func (a *app) issueFor(root []string, consumer string, abilities ...string) *response {
	a.t.Helper()
	return a.do(http.MethodPost, "/api/tokens", issueBody(a.t, consumer, abilities...), root...)
}

func (a *app) consumerRows() int64 {
	a.t.Helper()
	var n int64
	if err := a.db.Gorm.Model(&auth.Consumer{}).Count(&n).Error; err != nil {
		a.t.Fatal(err)
	}
	return n
}

// issuedData is the data of a 201 from POST /api/tokens.
func issuedData(r *response) map[string]any {
	r.t.Helper()
	r.wantStatus(http.StatusCreated)
	return r.json()["data"].(map[string]any)
}

// wantFieldError asserts a 422 whose errors hold field, the message
// containing want.
func wantFieldError(r *response, field, want string) {
	r.t.Helper()
	m := r.wantError(http.StatusUnprocessableEntity, "")
	errs, _ := m["errors"].(map[string]any)
	msgs, _ := errs[field].([]any)
	if len(msgs) == 0 {
		r.t.Fatalf("errors = %v, want %s", m["errors"], field)
	}
	if msg, _ := msgs[0].(string); !strings.Contains(msg, want) {
		r.t.Errorf("errors.%s = %q, want it to say %q", field, msg, want)
	}
}

// Consumer names compare byte for byte on both databases: "muller gmbh" is
// another consumer than "Müller GmbH" (MySQL's default collation would take
// them for one), and its token cannot read the other's licenses.
func TestConsumerNamesAreExact(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		muller := issuedData(a.issueFor(root, "Müller GmbH", auth.LicensesRead, auth.LicensesWrite))
		plain := issuedData(a.issueFor(root, "muller gmbh", auth.LicensesRead, auth.LicensesWrite))
		if plain["consumer"] != "muller gmbh" || muller["consumer"] != "Müller GmbH" {
			t.Fatalf("consumers = %v, %v", plain["consumer"], muller["consumer"])
		}
		mullerToken, plainToken := bearer(muller["token"].(string)), bearer(plain["token"].(string))

		lic := a.do(http.MethodPost, "/api/licenses", `{"name":"Shop","domain":"mueller.test"}`, mullerToken...).wantStatus(http.StatusCreated).licenseData()
		id := lic["id"].(string)
		a.do(http.MethodGet, "/api/licenses/"+id, "", mullerToken...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/licenses/"+id, "", plainToken...).wantStatus(http.StatusNotFound)
		if list := a.do(http.MethodGet, "/api/licenses", "", plainToken...).wantStatus(http.StatusOK).json(); len(list["data"].([]any)) != 0 {
			t.Errorf("muller gmbh lists %v, want none of Müller GmbH's licenses", list["data"])
		}

		// Each name lists its own token only.
		for name, want := range map[string]string{"Müller GmbH": muller["id"].(string), "muller gmbh": plain["id"].(string)} {
			data := a.do(http.MethodGet, "/api/tokens?consumer="+url.QueryEscape(name), "", root...).wantStatus(http.StatusOK).json()["data"].([]any)
			if len(data) != 1 || data[0].(map[string]any)["id"] != want {
				t.Errorf("tokens of %q = %v, want only %s", name, data, want)
			}
		}
	})
}

// A decomposed spelling (u + U+0308) names the same consumer as the composed
// one (ü): names are stored and looked up in NFC.
func TestConsumerNameNFDIsNFC(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		nfd, nfc := "Mu\u0308ller GmbH", "M\u00fcller GmbH"
		first := issuedData(a.issueFor(root, nfd, auth.LicensesRead, auth.LicensesWrite))
		if first["consumer"] != nfc {
			t.Errorf("consumer = %q, want it stored in NFC, %q", first["consumer"], nfc)
		}
		second := issuedData(a.issueFor(root, "  "+nfc+" ", auth.LicensesRead))
		if second["consumer"] != nfc {
			t.Errorf("consumer = %q, want %q", second["consumer"], nfc)
		}
		if n := a.consumerRows(); n != 2 { // root and Müller GmbH
			t.Errorf("%d consumers, want 2: the NFD and NFC spellings are one", n)
		}
		// Both tokens are the one consumer's: the license one writes, the other reads.
		lic := a.do(http.MethodPost, "/api/licenses", `{"name":"Shop","domain":"mueller.test"}`, bearer(first["token"].(string))...).wantStatus(http.StatusCreated).licenseData()
		a.do(http.MethodGet, "/api/licenses/"+lic["id"].(string), "", bearer(second["token"].(string))...).wantStatus(http.StatusOK)
		// Lookups by name normalise too.
		data := a.do(http.MethodGet, "/api/tokens?consumer="+url.QueryEscape(nfd), "", root...).wantStatus(http.StatusOK).json()["data"].([]any)
		if len(data) != 2 {
			t.Errorf("tokens of the NFD spelling = %d, want both", len(data))
		}
	})
}

// A new consumer whose name differs from an existing one only in case is
// refused, neither merged with it nor created beside it.
func TestConsumerNameDifferingOnlyInCaseIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		issuedData(a.issueFor(root, "acme", auth.LicensesRead))
		issuedData(a.issueFor(root, "Müller GmbH", auth.LicensesRead))
		before := a.consumerRows()
		for _, name := range []string{"ACME", "Acme", "müller gmbh", "MÜLLER GMBH", "MU\u0308LLER GMBH"} {
			t.Run(name, func(t *testing.T) {
				a := a.in(t)
				wantFieldError(a.issueFor(root, name, auth.LicensesRead), "consumer", "already exists")
			})
		}
		if after := a.consumerRows(); after != before {
			t.Errorf("%d consumers after the refusals, want %d", after, before)
		}
		// The exact names still work, and so through the CLI's path (no token).
		issuedData(a.issueFor(root, "acme", auth.LicensesRead))
		if _, err := a.auth.Issue(t.Context(), audit.Console(), auth.IssueInput{Consumer: "ACME", Abilities: []string{auth.LicensesRead}}); err == nil {
			t.Error("Issue for ACME after acme succeeded, want a validation error")
		}
	})
}

// Control and format characters (NUL, bidi overrides, zero-width
// characters, …) are refused in a consumer's name.
func TestConsumerNameWithInvisibleCharactersIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		before := a.consumerRows()
		for name, consumer := range map[string]string{
			"NUL":                  "acme\u0000",
			"right-to-left (202E)": "acme\u202Egpj.exe",
			"zero-width (200B)":    "ac\u200Bme",
			"BOM (FEFF)":           "\uFEFFacme",
			"isolate (2066)":       "\u2066acme\u2069",
			"tab inside":           "ac\tme",
			"escape":               "acme\u001b[31m",
		} {
			t.Run(name, func(t *testing.T) {
				a := a.in(t)
				wantFieldError(a.issueFor(root, consumer, auth.LicensesRead), "consumer", "must not contain control characters")
			})
		}
		if after := a.consumerRows(); after != before {
			t.Errorf("%d consumers after the refusals, want %d", after, before)
		}
	})
}

// License names refuse control, bidi and zero-width characters too.
func TestLicenseNameWithInvisibleCharactersIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		token := a.consumer("acme")
		for _, name := range []string{`Acme\u202Etxt.exe`, `Ac\u200Bme`, `Acme\u0000`, `Acme\u0007`} {
			wantFieldError(a.do(http.MethodPost, "/api/licenses", `{"name":"`+name+`","domain":"acme.test"}`, token...), "name", "must not contain control characters")
		}
		a.wantVendorCalls("", 0)
		if n := a.licenseRows(); n != 0 {
			t.Errorf("%d licenses, want none", n)
		}
		a.do(http.MethodPost, "/api/licenses", `{"name":"Acme Müller ✓","domain":"acme.test"}`, token...).wantStatus(http.StatusCreated)
	})
}

// A new consumer name whose letters mix scripts (a Cyrillic "а" among Latin
// "cme") is a look-alike of another name: 422 on consumer, on every path
// that creates a consumer (the API, the console's form, the command line),
// and nothing is created. Names in one script, or in the Japanese, Chinese
// and Korean mixes with Latin, are display names as before.
func TestMixedScriptConsumerNameIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		issuedData(a.issueFor(root, "acme", auth.LicensesRead))
		before := a.consumerRows()
		for name, consumer := range map[string]string{
			"Cyrillic a among Latin": "\u0430cme",
			"Latin among Cyrillic":   "\u0430\u0441me",
			"Greek capital alpha":    "\u0391cme Corp",
		} {
			t.Run(name, func(t *testing.T) {
				a := a.in(t)
				wantFieldError(a.issueFor(root, consumer, auth.LicensesRead), "consumer", "must not mix letters of different scripts")
				if err := a.runCLIErr("token", "issue", "--consumer", consumer, "--abilities", auth.LicensesRead); err == nil ||
					!strings.Contains(err.Error(), "must not mix letters of different scripts") {
					t.Errorf("licensor token issue --consumer %q: %v, want the refusal", consumer, err)
				}
			})
		}
		cc, _ := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens")
		page := cc.post("/console/tokens", url.Values{"consumer": {"\u0430cme"}, "abilities[]": {auth.LicensesRead}}).
			wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(page.Body, `id="issue-consumer-error">The consumer field must not mix letters of different scripts (it mixes Cyrillic and Latin)`) {
			t.Errorf("the console's form does not say why beside the consumer field: %s", page.Body)
		}
		if after := a.consumerRows(); after != before+1 { // ops, the console's operator
			t.Errorf("%d consumers after the refusals, want %d", after, before+1)
		}
		for _, consumer := range []string{"Zeta Corp", "Müller GmbH", "ООО «Ромашка»", "ソニー株式会社 Sony", "삼성 Samsung 三星", "中文 ㄅㄆㄇ"} {
			if got := issuedData(a.issueFor(root, consumer, auth.LicensesRead))["consumer"]; got != consumer {
				t.Errorf("consumer = %q, want %q", got, consumer)
			}
		}
	})
}

// A consumer named before the rule, with a name that mixes scripts, keeps
// working: its tokens are issued by the API, the console and the command
// line, and its name is found as it is.
func TestMixedScriptConsumerMadeBeforeKeepsWorking(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		const old = "\u0430cme" // Cyrillic а, Latin cme
		now := dbtime.Now()
		if err := a.db.Gorm.Create(&auth.Consumer{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Name: old, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
			t.Fatal(err)
		}
		root := bearer(a.token("root", auth.All))
		issued := issuedData(a.issueFor(root, old, auth.LicensesRead, auth.LicensesWrite))
		if issued["consumer"] != old {
			t.Fatalf("consumer = %q, want %q", issued["consumer"], old)
		}
		a.do(http.MethodPost, "/api/licenses", `{"name":"Old","domain":"old.test"}`, bearer(issued["token"].(string))...).wantStatus(http.StatusCreated)
		a.runCLI("token", "issue", "--consumer", old, "--abilities", auth.LicensesRead)
		cc, _ := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens")
		cc.post("/console/tokens", url.Values{"consumer": {old}, "abilities[]": {auth.LicensesRead}}).wantStatus(t, http.StatusCreated)
		if n := len(mustList(t, a, old)); n != 3 {
			t.Errorf("%d tokens of %q, want 3", n, old)
		}
		if n := a.consumerRows(); n != 3 { // the old one, root and ops
			t.Errorf("%d consumers, want 3: the old one was created again", n)
		}
	})
}
