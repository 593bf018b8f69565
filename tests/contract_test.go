package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/labstack/echo/v4"
	"golang.org/x/net/idna"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/web"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The contract: docs/openapi.yaml, checked against every response the
// feature tests receive. a.do checks each in-process exchange; contractClient
// checks the exchanges with real processes. A response fails the contract
// when its route and status are not documented, when it carries a header
// its documented response does not name (beyond the transport's own), when
// a documented required header is missing, or when its body does not match
// the documented schema; for the test, every documented object is closed
// (no property the document does not name), so a new field must be written
// into the contract before it ships.

// specPath is docs/openapi.yaml, resolved from repoRoot: a test that
// changes directory (t.Chdir) before the contract is first loaded still
// finds it.
var specPath = filepath.Join(repoRoot, "docs", "openapi.yaml")

// transportHeaders are the headers HTTP itself sends, which the contract
// does not list.
var transportHeaders = []string{"Content-Type", "Content-Length", "Date", "Vary", "Connection", "Transfer-Encoding", "Content-Encoding"}

// contractDoc is the loaded, closed contract and its router.
type contractDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// loadContract reads docs/openapi.yaml once per test run.
var loadContract = sync.OnceValues(func() (*contractDoc, error) {
	openapi3.DefineStringFormatValidator("hostname", openapi3.NewCallbackValidator(validHostname))
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", specPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", specPath, err)
	}
	// The router matches paths whatever the host the test used.
	doc.Servers = nil
	closeSchemas(doc)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", specPath, err)
	}
	return &contractDoc{doc: doc, router: router}, nil
})

// validHostname accepts what the API stores as a domain: a lowercase ASCII
// (punycode) hostname with at least two labels, no trailing dot, no IP.
func validHostname(s string) error {
	if net.ParseIP(s) != nil || strings.HasSuffix(s, ".") || !strings.Contains(s, ".") || strings.ToLower(s) != s {
		return fmt.Errorf("%q is not a hostname", s)
	}
	ascii, err := idna.Lookup.ToASCII(s)
	if err != nil || ascii != s {
		return fmt.Errorf("%q is not a hostname", s)
	}
	return nil
}

// closeSchemas makes every object schema of doc closed: allOf of objects is
// merged into one object, and an object that does not say what else it
// allows allows nothing else.
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var visit func(ref *openapi3.SchemaRef)
	visit = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.AllOf) > 0 && allObjects(s.AllOf) {
			merged := &openapi3.Schema{Properties: openapi3.Schemas{}}
			for _, part := range s.AllOf {
				mergeObject(merged, part.Value)
			}
			// In place: every reference to this schema sees one object.
			s.AllOf, s.Type, s.Properties, s.Required = nil, &openapi3.Types{openapi3.TypeObject}, merged.Properties, merged.Required
		}
		if s.Type != nil && s.Type.Is(openapi3.TypeObject) && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			visit(p)
		}
		visit(s.Items)
		visit(s.AdditionalProperties.Schema)
		for _, list := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, r := range list {
				visit(r)
			}
		}
	}
	for _, ref := range doc.Components.Schemas {
		visit(ref)
	}
	for _, ref := range doc.Components.Responses {
		for _, mt := range ref.Value.Content {
			visit(mt.Schema)
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					visit(mt.Schema)
				}
			}
		}
	}
}

// allObjects reports whether every part of an allOf is an object with
// properties (so the parts can be merged into one).
func allObjects(parts openapi3.SchemaRefs) bool {
	for _, p := range parts {
		if p.Value == nil || len(p.Value.AllOf) > 0 || len(p.Value.Properties) == 0 {
			if p.Value != nil && len(p.Value.AllOf) > 0 && allObjects(p.Value.AllOf) {
				continue
			}
			return false
		}
	}
	return true
}

// mergeObject adds part's properties and required names to merged; a
// property both name must satisfy both.
func mergeObject(merged, part *openapi3.Schema) {
	if len(part.AllOf) > 0 {
		for _, p := range part.AllOf {
			mergeObject(merged, p.Value)
		}
		return
	}
	for name, p := range part.Properties {
		if have, ok := merged.Properties[name]; ok {
			merged.Properties[name] = &openapi3.SchemaRef{Value: &openapi3.Schema{AllOf: openapi3.SchemaRefs{have, p}}}
			continue
		}
		merged.Properties[name] = p
	}
	for _, r := range part.Required {
		if !slices.Contains(merged.Required, r) {
			merged.Required = append(merged.Required, r)
		}
	}
}

// checkContract reports how one exchange breaks the contract, or nil.
func checkContract(req *http.Request, status int, header http.Header, body []byte) error {
	c, err := loadContract()
	if err != nil {
		return err
	}
	if req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" {
		return checkPreflight(c.doc, status, header, body)
	}
	head := req.Method == http.MethodHead
	if head {
		// HEAD is served on every GET route (as Laravel's router does): the
		// GET's status and headers, never a body.
		if len(body) > 0 {
			return fmt.Errorf("HEAD %s answered %d with a body: %.200s", req.URL.Path, status, body)
		}
		req = req.Clone(context.Background())
		req.Method = http.MethodGet
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if head && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
			return nil
		}
		// No documented operation: only the router's own 404 and 405, in
		// the error shape, may answer there.
		var rerr *routers.RouteError
		if !errors.As(err, &rerr) {
			return err
		}
		switch status {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			return checkBody(c.doc.Components.Responses["NotFound"].Value.Content, header, body)
		case http.StatusInternalServerError:
			// A route a test added to make the server fail: still in the contract's 500 shape.
			return checkBody(c.doc.Components.Responses["ServerError"].Value.Content, header, body)
		}
		return fmt.Errorf("%s %s is not in the contract, yet it answered %d", req.Method, req.URL.Path, status)
	}
	opResp := route.Operation.Responses.Status(status)
	if opResp == nil {
		return fmt.Errorf("%s %s answered %d, which the contract does not list", req.Method, route.Path, status)
	}
	declared := opResp.Value.Headers
	for name := range header {
		if !hasHeader(declared, name) {
			return fmt.Errorf("%s %s answered %d with header %s, which the contract does not list there", req.Method, route.Path, status, name)
		}
	}
	if head {
		return nil
	}
	if len(opResp.Value.Content) == 0 && len(body) > 0 {
		return fmt.Errorf("%s %s answered %d with a body, where the contract lists none: %.200s", req.Method, route.Path, status, body)
	}
	// The request is only matched here, not validated: the tests send bad
	// requests on purpose, and the server's answers to them are the subject.
	// Header names are case-insensitive; the validator looks them up in
	// canonical form, and some are sent in another (X-RateLimit-*).
	canonical := http.Header{}
	for name, values := range header {
		canonical[http.CanonicalHeaderKey(name)] = append(canonical[http.CanonicalHeaderKey(name)], values...)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 canonical,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("%s %s answered %d against the contract: %v; body: %.300s", req.Method, route.Path, status, err, body)
	}
	return nil
}

// checkPreflight checks a CORS preflight's answer against the contract's
// Preflight response: 204, no body, only the headers it lists.
func checkPreflight(doc *openapi3.T, status int, header http.Header, body []byte) error {
	declared := doc.Components.Responses["Preflight"].Value.Headers
	if status != http.StatusNoContent || len(body) > 0 {
		return fmt.Errorf("a preflight answered %d with %d bytes of body, want 204 and none", status, len(body))
	}
	for name := range header {
		if !hasHeader(declared, name) {
			return fmt.Errorf("a preflight answered with header %s, which the contract's Preflight does not list", name)
		}
	}
	for name, h := range declared {
		if h.Value.Required && header.Get(name) == "" {
			return fmt.Errorf("a preflight answered without its required header %s", name)
		}
	}
	return nil
}

// hasHeader reports whether headers names name, in any case, or HTTP
// itself sends it (transportHeaders).
func hasHeader(headers openapi3.Headers, name string) bool {
	same := func(h string) bool { return strings.EqualFold(h, name) }
	return slices.ContainsFunc(transportHeaders, same) || slices.ContainsFunc(slices.Collect(maps.Keys(headers)), same)
}

// checkBody validates a JSON body (an error's) against the schema content
// gives its media type (application/json, application/problem+json), as
// the router's validation does for a documented route.
func checkBody(content openapi3.Content, header http.Header, body []byte) error {
	ct := header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("error body has Content-Type %q: %v", ct, err)
	}
	media := content[mt]
	if media == nil || media.Schema == nil {
		return fmt.Errorf("error body has Content-Type %q, which the contract does not list there", ct)
	}
	schema := media.Schema
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("error body is not JSON: %v", err)
	}
	if err := schema.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("error body does not match the contract: %v; body: %.300s", err, body)
	}
	return nil
}

// contractTransport checks every exchange it carries against the contract;
// a breach is recorded and fails the test run (see TestMain), since the
// callers may be goroutines without a *testing.T.
type contractTransport struct{ base http.RoundTripper }

// contractClient is the HTTP client tests use to talk to a licensor they
// run as a real process or a real listener.
var contractClient = &http.Client{Transport: contractTransport{base: http.DefaultTransport}}

var (
	breachMu sync.Mutex
	breaches []string
)

// RoundTrip implements http.RoundTripper.
func (ct contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := ct.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		// A body cut short is the test's subject (a killed process), not a breach.
		return resp, nil
	}
	if err := checkContract(req, resp.StatusCode, resp.Header, body); err != nil {
		recordBreach(err)
	}
	return resp, nil
}

// recordBreach keeps a breach of the contract for TestMain to report.
func recordBreach(err error) {
	breachMu.Lock()
	breaches = append(breaches, err.Error())
	breachMu.Unlock()
}

// contractBreaches returns what contractTransport recorded.
func contractBreaches() []string {
	breachMu.Lock()
	defer breachMu.Unlock()
	return slices.Clone(breaches)
}

// TestEveryConsoleRouteIsDocumented fails when the server has a console
// route docs/console.md does not name (as "`METHOD /console/path`", Echo's
// :param form), or the page names one the server does not have.
func TestEveryConsoleRouteIsDocumented(t *testing.T) {
	doc := readRepoFile(t, "docs/console.md")
	a := newApp(t, testdb.New(t, database.SQLite))
	served := map[string]bool{}
	for _, r := range a.e.Routes() {
		if (r.Path == web.Prefix || strings.HasPrefix(r.Path, web.Prefix+"/")) && !strings.HasPrefix(r.Method, "echo_route") && r.Method != echo.RouteNotFound {
			served[r.Method+" "+r.Path] = true
			if !strings.Contains(doc, "`"+r.Method+" "+r.Path+"`") {
				t.Errorf("docs/console.md does not name `%s %s`", r.Method, r.Path)
			}
		}
	}
	if len(served) < 10 {
		t.Fatalf("%d console routes: is the console mounted?", len(served))
	}
	for _, m := range regexp.MustCompile("`(GET|POST) (/console[^`]*)`").FindAllStringSubmatch(doc, -1) {
		if !served[m[1]+" "+m[2]] {
			t.Errorf("docs/console.md names `%s %s`, which the server does not have", m[1], m[2])
		}
	}
}

// TestEveryRouteIsInTheContract fails when the server has a route
// docs/openapi.yaml does not document, or the document names one the server
// does not have.
func TestEveryRouteIsInTheContract(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, testdb.New(t, database.SQLite))
	served := map[string]bool{}
	for _, r := range a.e.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasPrefix(r.Method, "echo_route") {
			continue
		}
		if r.Path == web.Prefix || strings.HasPrefix(r.Path, web.Prefix+"/") {
			continue // the console's HTML pages: docs/console.md is their contract (TestEveryConsoleRouteIsDocumented)
		}
		served[r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	if len(served) == 0 || len(documented) == 0 {
		t.Fatalf("served %d routes, documented %d: nothing to compare", len(served), len(documented))
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("the server has %s, which docs/openapi.yaml does not document", r)
		}
	}
	for r := range documented {
		method, path, _ := strings.Cut(r, " ")
		if method == http.MethodOptions && !strings.HasPrefix(path, "/api/") {
			continue // a plain OPTIONS, answered on every route's path (TestPlainOptionsListsThePathsMethods)
		}
		if method == http.MethodOptions && strings.HasPrefix(path, "/api/") {
			// A preflight is answered before routing, on every api/* path:
			// the server must answer this one.
			concrete := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "01JDQ8Z7F0A2B4C6D8E0G2H4J6")
			got := a.do(http.MethodOptions, concrete, "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
			if got.Code != http.StatusNoContent {
				t.Errorf("docs/openapi.yaml documents %s, which answers %d, not a preflight's 204", r, got.Code)
			}
			continue
		}
		if !served[r] {
			t.Errorf("docs/openapi.yaml documents %s, which the server does not have", r)
		}
	}
}

// echoParam is a parameter of an Echo path: /a/:id is OpenAPI's /a/{id}.
var echoParam = regexp.MustCompile(`:([^/]+)`)

// TestTheContractCatchesWhatItDoesNotDescribe feeds the checker answers the
// contract does not allow, each one change away from an answer it does, so
// the feature suite's silence means something.
func TestTheContractCatchesWhatItDoesNotDescribe(t *testing.T) {
	const license = `{"data":{"id":"01JDQ8Z7F0A2B4C6D8E0G2H4J6","name":"Acme","domain":"acme.test","license_key":"k","status":"active","vendor_site_id":"s1","created_at":"2026-11-30T10:00:00.000000Z","updated_at":"2026-11-30T10:00:00.000000Z"}}`
	json := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}, "Cache-Control": {"no-cache, private"}}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	without := func(h http.Header, name string) http.Header {
		h = h.Clone()
		h.Del(name)
		return h
	}
	problem := with(json, "Content-Type", "application/problem+json")
	created := with(json, "Location", "/api/licenses/01JDQ8Z7F0A2B4C6D8E0G2H4J6")
	const audited = `"actor":"token","actor_token_id":"01JDQ7Z0A2B4C6D8E0F2G4H6J8","actor_consumer":"ops","request_id":"r1","created_at":"2026-11-30T10:00:00.000000Z"`
	const tokenEvents = `{"data":[{"id":2,"event":"token.revoked","token_id":"t","consumer":"acme",` + audited + `}],"meta":{"current_page":1,"per_page":50,"total":1,"last_page":1}}`
	const intentEvents = `{"data":[{"id":3,"event":"intent.discarded","intent_id":"i1","consumer":null,"reason":"why",` + audited + `}]}`
	const attempted = `{"data":[{"id":4,"event":"intent.attempted","intent_id":"i1","consumer":"acme","reason":"attempt 2: completed",` +
		`"actor":"reconciler","actor_token_id":null,"actor_consumer":null,"request_id":null,"created_at":"2026-11-30T10:00:00.000000Z"}]}`
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a documented create", "POST", "/api/licenses", 201, created, license, true},
		{"a replayed create", "POST", "/api/licenses", 201, with(created, "Idempotent-Replayed", "true"), license, true},
		{"an undocumented status", "POST", "/api/licenses", 418, json, `{"message":"I'm a teapot."}`, false},
		{"an undocumented header", "POST", "/api/licenses", 201, with(created, "X-Debug", "1"), license, false},
		{"a required header missing", "POST", "/api/licenses", 201, without(created, "Location"), license, false},
		{"X-Request-Id missing", "POST", "/api/licenses", 201, without(created, "X-Request-Id"), license, false},
		{"a field the contract does not name", "POST", "/api/licenses", 201, created, strings.Replace(license, `"name"`, `"secret":"x","name"`, 1), false},
		{"a required field missing", "POST", "/api/licenses", 201, created, strings.Replace(license, `"license_key":"k",`, ``, 1), false},
		{"a timestamp without microseconds", "POST", "/api/licenses", 201, created, strings.Replace(license, `00.000000Z","updated`, `00Z","updated`, 1), false},
		{"a domain that is no hostname", "POST", "/api/licenses", 201, created, strings.Replace(license, `acme.test`, `10.0.0.1`, 1), false},
		{"an error code the status does not have", "POST", "/api/licenses", 409, json, `{"message":"x","code":"rate_limited"}`, false},
		{"a 429 without Retry-After", "GET", "/api/licenses", 429, with(json, "X-RateLimit-Reset", "1"), `{"message":"Too Many Attempts.","code":"rate_limited"}`, false},
		{"a body where none is documented", "DELETE", "/api/tokens/1", 204, json, `{}`, false},
		{"an unknown route answering 200", "GET", "/api/nothing", 200, json, `{}`, false},
		{"an unknown route's 404", "GET", "/api/nothing", 404, json, `{"message":"Not Found."}`, true},
		{"a token event", "GET", "/api/tokens/events", 200, json, tokenEvents, true},
		{"a token event whose actor is a client's word", "GET", "/api/tokens/events", 200, json, strings.Replace(tokenEvents, `"actor":"token"`, `"actor":"req-1"`, 1), false},
		{"a token event without its request id", "GET", "/api/tokens/events", 200, json, strings.Replace(tokenEvents, `,"request_id":"r1"`, ``, 1), false},
		{"a token event of an intent", "GET", "/api/tokens/events", 200, json, strings.Replace(tokenEvents, `"token.revoked"`, `"intent.discarded"`, 1), false},
		{"a token without its issuer", "GET", "/api/tokens", 200, json, `{"data":[{"id":"t","consumer":"c","name":"n","abilities":[],"last_used_at":null,"expires_at":"2026-11-30T10:00:00.000000Z","revoked_at":null,"created_at":"2026-11-30T10:00:00.000000Z"}]}`, false},
		{"an intent event", "GET", "/api/intents/i1/events", 200, json, intentEvents, true},
		{"an intent event without its reason", "GET", "/api/intents/i1/events", 200, json, strings.Replace(intentEvents, `,"reason":"why"`, ``, 1), false},
		{"a reconciler's attempt", "GET", "/api/intents/i1/events", 200, json, attempted, true},
		{"an attempt of an actor the contract does not name", "GET", "/api/intents/i1/events", 200, json, strings.Replace(attempted, `"actor":"reconciler"`, `"actor":"cron"`, 1), false},
		{"an intent event the contract does not name", "GET", "/api/intents/i1/events", 200, json, strings.Replace(attempted, `"intent.attempted"`, `"intent.resumed"`, 1), false},
		{"a discarded key's retry", "POST", "/api/licenses", 409, json, `{"message":"x","code":"intent_discarded"}`, true},
		{"a discard's refusal", "POST", "/api/intents/i1/discard", 409, json, `{"message":"x","code":"intent_not_discardable"}`, true},
		{"a problem", "POST", "/api/licenses", 409, problem, `{"type":"https://licensor.dev/problems/domain-taken","title":"Conflict","status":409,"detail":"x","code":"domain_taken"}`, true},
		{"a problem sent as application/json", "POST", "/api/licenses", 409, json, `{"type":"https://licensor.dev/problems/domain-taken","title":"Conflict","status":409,"detail":"x","code":"domain_taken"}`, false},
		{"Laravel's shape sent as a problem", "POST", "/api/licenses", 409, problem, `{"message":"x","code":"domain_taken"}`, false},
		{"a problem without its type", "POST", "/api/licenses", 409, problem, `{"title":"Conflict","status":409,"detail":"x","code":"domain_taken"}`, false},
		{"a problem whose type is no problem URI", "POST", "/api/licenses", 409, problem, `{"type":"https://example.com/x","title":"Conflict","status":409,"detail":"x","code":"domain_taken"}`, false},
		{"a problem with a code the status does not have", "POST", "/api/licenses", 409, problem, `{"type":"https://licensor.dev/problems/rate-limited","title":"Conflict","status":409,"detail":"x","code":"rate_limited"}`, false},
		{"a problem of a validation error", "POST", "/api/licenses", 422, problem, `{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"x","errors":{"name":["x"]}}`, true},
		{"an unknown route's 404 as a problem", "GET", "/api/nothing", 404, problem, `{"type":"about:blank","title":"Not Found","status":404,"detail":"Not Found."}`, true},
		{"an unknown route's 404 problem sent as application/json", "GET", "/api/nothing", 404, json, `{"type":"about:blank","title":"Not Found","status":404,"detail":"Not Found."}`, false},
		{"an unknown route's 404 in Laravel's shape sent as a problem", "GET", "/api/nothing", 404, problem, `{"message":"Not Found."}`, false},
		{"an unknown route's 500 as a problem", "GET", "/api/nothing", 500, problem, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"Server Error"}`, true},
		{"an unknown route's 500 problem with another detail", "GET", "/api/nothing", 500, problem, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"Server Error."}`, false},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		err := checkContract(req, tc.status, tc.header, []byte(tc.body))
		if tc.ok && err != nil {
			t.Errorf("%s: the contract refused it: %v", tc.name, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: the contract let it pass", tc.name)
		}
	}
}

// The audit routes and the discard keep the contract in each of their
// answers: a flow through every status they have (each checked by a.do
// against docs/openapi.yaml), on both databases.
func TestAuditRoutesKeepTheContract(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		acme := a.consumer("acme")
		issued := a.do(http.MethodPost, "/api/tokens", issueBody(t, "globex", auth.LicensesRead), root...).wantStatus(http.StatusCreated).json()["data"].(map[string]any)
		a.do(http.MethodGet, "/api/tokens", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodDelete, "/api/tokens/"+issued["id"].(string), "", root...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/tokens/events", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/tokens/events?token="+issued["id"].(string)+"&per_page=1&page=2", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/tokens/events?per_page=500", "", root...).wantStatus(http.StatusUnprocessableEntity)
		a.do(http.MethodGet, "/api/tokens/events", "", acme...).wantStatus(http.StatusForbidden)
		a.do(http.MethodGet, "/api/tokens/events", "").wantStatus(http.StatusUnauthorized)

		a.plantRecord("acme", "contract-1", acmeBody, idempotency.StatusFailed, time.Hour)
		id := ptr.Deref(a.record("contract-1").PublicID)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", "", root...).wantStatus(http.StatusBadRequest)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":"x"}`, append(root, "Content-Type", "text/plain")...).wantStatus(http.StatusUnsupportedMediaType)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":""}`, root...).wantStatus(http.StatusUnprocessableEntity)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":"x"}`, acme...).wantStatus(http.StatusForbidden)
		a.do(http.MethodPost, "/api/intents/01NOSUCHINTENT000000000000/discard", `{"reason":"x"}`, root...).wantStatus(http.StatusNotFound)
		a.do(http.MethodGet, "/api/intents/"+id+"/events", "", root...).wantStatus(http.StatusOK) // none yet: an empty list
		a.do(http.MethodPost, "/api/intents/"+id+"/retry", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":"x"}`, root...).wantError(http.StatusConflict, "intent_not_discardable")
		a.plantRecord("acme", "contract-2", acmeBody, "abandoned", -time.Minute)
		other := ptr.Deref(a.record("contract-2").PublicID)
		a.do(http.MethodPost, "/api/intents/"+other+"/discard", `{"reason":"x"}`, root...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/intents/"+other+"/events", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/intents/"+id+"/events", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodGet, "/api/intents/01NOSUCHINTENT000000000000/events", "", root...).wantStatus(http.StatusNotFound)
		a.do(http.MethodGet, "/api/intents?status=discarded", "", root...).wantStatus(http.StatusOK)
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "contract-2")...).wantError(http.StatusConflict, "intent_discarded")
	})
}
