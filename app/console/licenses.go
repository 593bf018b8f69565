package console

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/licensor-api/licensor/client"
	"github.com/licensor-api/licensor/config"
)

// defaultLicensorURL is where `licensor licenses` looks for the API when
// LICENSOR_URL is not set: where `go run .` serves it.
const defaultLicensorURL = "http://127.0.0.1:8080"

// licensesSummary is the line every `licensor licenses` help ends its
// summary with: where the command finds the API.
const licensesSummary = "A client of a running API at LICENSOR_URL (default " + defaultLicensorURL + "), with the token in LICENSOR_TOKEN."

// networkRetryWindow is how long `licensor licenses` goes on retrying
// network errors (a refused connection while licensor restarts) before it
// says what it knows: that nothing was sent, or that the outcome is unknown.
const networkRetryWindow = 10 * time.Second

// licensesCmd is `licensor licenses create|list|rotate-key`: a client of a running
// API, built on package client and its retry policy. It reads LICENSOR_URL
// and LICENSOR_TOKEN (and, for the default URL, APP_URL and APP_ADDR) from
// the environment or the working directory's .env, as the server reads its
// own. opts are added to the client's: the tests pass a sleep that records
// the backoff instead of waiting it out, and a clock.
func licensesCmd(ctx context.Context, e env, opts ...client.Option) error {
	opts = append([]client.Option{client.WithNetworkRetryWindow(networkRetryWindow)}, opts...)
	return runSubcommand(ctx, e, "licenses", licensesSummary, []subcommand{
		{"create", "create a license for a domain; prints it as JSON on stdout",
			func(ctx context.Context, e env) error { return licensesCreate(ctx, e, opts) }},
		{"list", "list one page of your licenses, as a table or as JSON",
			func(ctx context.Context, e env) error { return licensesList(ctx, e, opts) }},
		{"rotate-key", "replace a license's key at the vendor (a leaked one); prints the new key",
			func(ctx context.Context, e env) error { return licensesRotateKey(ctx, e, opts) }},
	})
}

// licensesCreate prints the license as JSON on stdout (--json, the default
// and only format: scripts read it) and what happened on stderr. It makes
// the intent's key itself, so that a run that gives up can name it: the
// same command with that --key picks up the same outcome.
func licensesCreate(ctx context.Context, e env, opts []client.Option) error {
	fs := flag.NewFlagSet("licenses create", flag.ContinueOnError)
	name := fs.String("name", "", "the license's name, e.g. the customer's (required)")
	domain := fs.String("domain", "", "the domain to license, e.g. acme.test (required)")
	key := fs.String("key", "", "the Idempotency-Key; give the one a failed run printed to get that intent's outcome (default: a new key)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long, retries included")
	asJSON := fs.Bool("json", true, "print the license as JSON on stdout: the default and only format, kept for scripts (what happened goes to stderr)")
	setUsage(fs, "licenses create [flags]", "Creates a license for the domain, safely retried under one Idempotency-Key. "+licensesSummary)
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("licenses create: unexpected argument %q (flags only: --name, --domain)", fs.Arg(0))
	case !*asJSON:
		return usagef("licenses create: --json=false: JSON is create's only output")
	case *name == "" || *domain == "":
		return usagef("licenses create: --name and --domain are required")
	case *timeout <= 0:
		return usagef("licenses create: --timeout must be positive")
	}
	var lic client.License
	err := keyedWrite(ctx, e, opts, "create", *key, *timeout, keyedOutcome{"made it", "the license may have been created", "the same key never makes a second license"},
		func(ctx context.Context, c *client.Client, key string) (err error) {
			lic, err = c.CreateLicense(ctx, client.CreateLicenseInput{Name: *name, Domain: *domain, IdempotencyKey: key})
			return err
		})
	if err != nil {
		return err
	}
	switch {
	case !lic.Created:
		fmt.Fprintf(e.stderr, "you already hold license %s for %s: nothing new was created\n", lic.ID, lic.Domain)
	case lic.Replayed:
		fmt.Fprintf(e.stderr, "created license %s for %s (by an earlier attempt with this key)\n", lic.ID, lic.Domain)
	default:
		fmt.Fprintf(e.stderr, "created license %s for %s\n", lic.ID, lic.Domain)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(lic)
}

// licensesRotateKey is `licensor licenses rotate-key ID`: the license's key
// replaced at the vendor, under one Idempotency-Key as a create is (--key
// picks up the outcome of a run that gave up). It prints the new key, or
// with --json the license as the API shows it; what happened goes to stderr.
func licensesRotateKey(ctx context.Context, e env, opts []client.Option) error {
	fs := flag.NewFlagSet("licenses rotate-key", flag.ContinueOnError)
	key := fs.String("key", "", "the Idempotency-Key; give the one a failed run printed to get that rotation's outcome (default: a new key)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long, retries included")
	asJSON := fs.Bool("json", false, "print the license as JSON on stdout, not just its new key")
	setUsage(fs, "licenses rotate-key ID [flags]", "Replaces the license's key at the vendor, safely retried under one Idempotency-Key. "+licensesSummary)
	id, ok, err := oneArg(fs, e, "licenses rotate-key", "license ID (see `licensor licenses list`)")
	switch {
	case !ok:
		return err
	case *timeout <= 0:
		return usagef("licenses rotate-key: --timeout must be positive")
	}
	var lic client.License
	err = keyedWrite(ctx, e, opts, "rotate-key", *key, *timeout, keyedOutcome{"rotated it", "the key may have been rotated", "the same key never rotates twice"},
		func(ctx context.Context, c *client.Client, key string) (err error) {
			lic, err = c.RotateLicenseKey(ctx, id, key)
			return err
		})
	if err != nil {
		return err
	}
	how := ""
	if lic.Replayed {
		how = " (by an earlier attempt with this key)"
	}
	fmt.Fprintf(e.stderr, "rotated the key of license %s for %s%s\n", lic.ID, lic.Domain, how)
	if !*asJSON {
		_, err := fmt.Fprintln(e.stdout, lic.LicenseKey)
		return err
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(lic)
}

// keyedOutcome is what a keyed write that gave up may have done, in the
// words of its advice: "… may have <mayHave>", "so <effect>", "(<once>)".
type keyedOutcome struct{ mayHave, effect, once string }

// keyedWrite runs call, a write of `licenses <name>` sent under one
// Idempotency-Key (key, or a new one) on every attempt, within timeout; a
// failure says what to do, and names the key that picks up an outcome not
// known yet.
func keyedWrite(ctx context.Context, e env, opts []client.Option, name, key string, timeout time.Duration, out keyedOutcome,
	call func(ctx context.Context, c *client.Client, key string) error) error {
	c, base, err := licensorClient(e, opts)
	if err != nil {
		return err
	}
	if key == "" {
		key = client.NewIdempotencyKey()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = call(ctx, c, key)
	switch {
	case errors.Is(err, client.ErrInvalidKey):
		return usagef("licenses %s: --key: %v", name, client.ErrInvalidKey)
	case err != nil:
		return explainLicensesError(err, base, "licenses:write", func() string {
			return fmt.Sprintf("the outcome is not known yet (%s may have %s): run the same command with --key %s to get it", base, out.mayHave, key)
		}, func() string {
			return fmt.Sprintf("the outcome is unknown: a request reached %s and the call ended on a network error, so %s; "+
				"run the same command with --key %s to get the outcome (%s)", base, out.effect, key, out.once)
		})
	}
	return nil
}

// licensesList prints one page of the caller's licenses as a table, or with
// --json as the API's page ({"data":[…],"meta":{…}}); the page line goes to
// stderr either way.
func licensesList(ctx context.Context, e env, opts []client.Option) error {
	fs := flag.NewFlagSet("licenses list", flag.ContinueOnError)
	page := fs.Int("page", 1, "the page, from 1")
	perPage := fs.Int("per-page", 15, "licenses per page, 1 to 100")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long, retries included")
	asJSON := fs.Bool("json", false, `print the page as JSON, {"data":[license…],"meta":{…}}, instead of a table`)
	setUsage(fs, "licenses list [flags]", "Lists one page of your licenses, newest first. "+licensesSummary)
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("licenses list: unexpected argument %q", fs.Arg(0))
	case *page < 1:
		return usagef("licenses list: --page must be 1 or more")
	case *perPage < 1 || *perPage > 100:
		return usagef("licenses list: --per-page must be between 1 and 100")
	case *timeout <= 0:
		return usagef("licenses list: --timeout must be positive")
	}
	c, base, err := licensorClient(e, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	p, err := c.ListLicenses(ctx, *page, *perPage)
	if err != nil {
		again := func() string {
			return "check that licensor serves at " + base + " (LICENSOR_URL) and run the command again"
		}
		return explainLicensesError(err, base, "licenses:read", again, again)
	}
	if err := writeLicenses(e.stdout, p, *asJSON); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "page %d of %d (%d in all)\n", p.CurrentPage, p.LastPage, p.Total)
	return nil
}

// pageJSON is a page of licenses as the API writes it.
type pageJSON struct {
	Data []client.License `json:"data"`
	Meta struct {
		CurrentPage int `json:"current_page"`
		PerPage     int `json:"per_page"`
		Total       int `json:"total"`
		LastPage    int `json:"last_page"`
	} `json:"meta"`
}

// writeLicenses writes a page as a table, or as JSON in the API's shape.
func writeLicenses(w io.Writer, p client.Page, asJSON bool) error {
	if asJSON {
		out := pageJSON{Data: p.Licenses}
		if out.Data == nil {
			out.Data = []client.License{} // [] rather than null
		}
		out.Meta.CurrentPage, out.Meta.PerPage, out.Meta.Total, out.Meta.LastPage = p.CurrentPage, p.PerPage, p.Total, p.LastPage
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return writeTable(w, licenseColumns, p.Licenses)
}

// licenseColumns are the table of `licenses list`: never the key.
var licenseColumns = []column[client.License]{
	{"ID", func(l client.License) string { return l.ID }},
	{"DOMAIN", func(l client.License) string { return l.Domain }},
	{"NAME", func(l client.License) string { return l.Name }},
	{"STATUS", func(l client.License) string { return l.Status }},
	{"CREATED", func(l client.License) string { return when(l.CreatedAt) }},
}

// licensorClient builds the API client from LICENSOR_URL and LICENSOR_TOKEN
// (required), read from the environment or .env; it returns the URL too.
// Without LICENSOR_URL it calls the server this directory configures: its
// APP_URL, or the APP_URL APP_ADDR gives, or defaultLicensorURL.
func licensorClient(e env, opts []client.Option) (*client.Client, string, error) {
	getenv, err := config.WithDotenv(e.getenv)
	if err != nil {
		return nil, "", err
	}
	base := getenv("LICENSOR_URL")
	switch {
	case base != "":
	case getenv("APP_URL") != "":
		base = getenv("APP_URL")
	case getenv("APP_ADDR") != "":
		base = config.URLOf(getenv("APP_ADDR"))
	default:
		base = defaultLicensorURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", usagef("licenses: LICENSOR_URL %q is not an http(s) URL like %s", base, defaultLicensorURL)
	}
	token := getenv("LICENSOR_TOKEN")
	if token == "" {
		return nil, "", usagef("licenses: set LICENSOR_TOKEN to an API token (`licensor token issue --consumer NAME --abilities licenses:read,licenses:write` prints one)")
	}
	return client.New(base, token, opts...), base, nil
}

// explainLicensesError adds what to do to a failed call: when no attempt
// reached the server, that nothing happened; for a refusal, what the API's
// status and code ask for; for a call that gave up on retryable answers,
// retry's advice, and on a network error after a request went out, lost's.
func explainLicensesError(err error, base string, ability string, retry, lost func() string) error {
	if errors.Is(err, client.ErrNotSent) {
		return fmt.Errorf("%w; nothing happened, since no request reached licensor: check that licensor serves at %s (LICENSOR_URL), then run the command again", err, base)
	}
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%w; %s", err, lost())
	}
	if apiErr.Retryable() {
		return fmt.Errorf("%w; %s", err, retry())
	}
	var todo string
	switch {
	case apiErr.Status == http.StatusUnauthorized:
		todo = "check LICENSOR_TOKEN: the API refuses it (missing, expired or revoked); `licensor token issue` makes a new one"
	case apiErr.Status == http.StatusForbidden:
		todo = "LICENSOR_TOKEN lacks the " + ability + " ability: issue a token that has it"
	case apiErr.Code == "license_not_active":
		todo = "the license is revoked or being revoked: its key no longer works, and cannot be rotated"
	case apiErr.Status == http.StatusNotFound:
		todo = "you hold no license with that id (`licensor licenses list` shows yours)"
	case apiErr.Code == "domain_taken":
		todo = "another consumer holds this domain; nothing was created"
	case apiErr.Code == "idempotency_key_reused":
		todo = "that --key belongs to another request: a changed request is a new intent, so drop --key"
	case apiErr.Code == "vendor_rejected":
		todo = "the vendor refuses this name or domain: change it"
	case len(apiErr.Fields) > 0:
		todo = "fix " + strings.Join(slices.Sorted(maps.Keys(apiErr.Fields)), ", ") + " and run again"
	default:
		todo = "the same request will get the same answer; quote the request id when reporting it"
	}
	return fmt.Errorf("%w; %s", err, todo)
}
