package vendorclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/wait"
)

// defaultTimeout bounds a call when the configuration gives none: a vendor
// call without a deadline could hold a request forever.
const defaultTimeout = 10 * time.Second

// HTTPDriver speaks the vendor protocol (package vendorproto) over HTTP. It
// retries only a 429, within the configuration's budget, and returns every
// other failure as a *licenses.UnavailableError, *licenses.RejectedError or
// *licenses.UncertainError. Build it with NewHTTP.
type HTTPDriver struct {
	options

	client *http.Client // no redirects: a redirected POST would become a GET
	base   string       // VENDOR_URL without its trailing slash
	token  string
	cfg    config.Vendor
	log    *slog.Logger
}

var (
	_ licenses.Vendor     = (*HTTPDriver)(nil)
	_ licenses.SiteLister = (*HTTPDriver)(nil) // the drift check pages through the vendor's sites
)

// options are the http driver's clock and hooks (see the With options).
// After NewHTTP none is nil.
type options struct {
	sleep     func(ctx context.Context, d time.Duration) error
	now       func() time.Time
	jitter    func(d time.Duration) time.Duration
	observe   func(call string, status int)
	onRetry   func(call string)
	userAgent string
}

// defaultUserAgent has no version: the driver cannot know it by itself.
const defaultUserAgent = "licensor"

// Option sets one of the http driver's hooks at construction; see NewHTTP.
// A nil function leaves the default in place.
type Option func(*options)

// WithObserver reports the driver's calls, typically to metrics: observe is
// told of every answer, with the call (its vendorproto.Call's Name) and its
// status, 0 when none came; onRetry is told of every retry after a 429,
// before its wait. Either may be nil. By default nothing is reported.
func WithObserver(observe func(call string, status int), onRetry func(call string)) Option {
	return func(o *options) { o.observe, o.onRetry = observe, onRetry }
}

// WithSleep replaces how the driver waits between 429 retries. sleep must
// return ctx.Err() early when ctx ends. By default it waits on a timer.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.sleep = sleep }
}

// WithClock replaces the clock the driver reads Retry-After dates and the
// context's deadline against. By default it is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithJitter replaces the random part of a backoff: jitter(d) must return a
// duration in [0, d]. By default it is uniformly random.
func WithJitter(jitter func(d time.Duration) time.Duration) Option {
	return func(o *options) { o.jitter = jitter }
}

// WithUserAgent sets the User-Agent header of every request, e.g.
// "licensor/v1.2.3": the application passes its build's version in. By
// default it is "licensor". An empty ua leaves the default in place.
func WithUserAgent(ua string) Option {
	return func(o *options) { o.userAgent = ua }
}

// NewHTTP builds the http driver from the vendor configuration; opts set its
// clock and hooks, the last one given winning.
func NewHTTP(cfg config.Vendor, log *slog.Logger, opts ...Option) (*HTTPDriver, error) {
	if cfg.URL == "" {
		return nil, errors.New("VENDOR_URL is required for VENDOR_DRIVER=http")
	}
	if u, err := url.Parse(cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("VENDOR_URL %q is not an http(s) URL", cfg.URL)
	}
	if cfg.Token == "" {
		return nil, errors.New("VENDOR_TOKEN is required for VENDOR_DRIVER=http")
	}
	return newHTTP(cfg, http.DefaultTransport.(*http.Transport).Clone(), log, opts), nil
}

func newHTTP(cfg config.Vendor, transport http.RoundTripper, log *slog.Logger, opts []Option) *HTTPDriver {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HTTPDriver{
		options: resolve(opts),
		client: &http.Client{
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		base:  strings.TrimRight(cfg.URL, "/"),
		token: cfg.Token,
		cfg:   cfg,
		log:   log,
	}
}

func resolve(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.sleep == nil {
		o.sleep = wait.Sleep
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.jitter == nil {
		o.jitter = wait.Jitter
	}
	if o.observe == nil {
		o.observe = func(string, int) {}
	}
	if o.onRetry == nil {
		o.onRetry = func(string) {}
	}
	if o.userAgent == "" {
		o.userAgent = defaultUserAgent
	}
	return o
}

// FindSite lists the vendor's sites for the domain and returns the first
// whose domain is the one asked (DNS names ignore case), or nil.
func (d *HTTPDriver) FindSite(ctx context.Context, domain string) (*licenses.Site, error) {
	c := call{Call: vendorproto.ListSites, path: vendorproto.ListSites.Pattern + "?domain=" + url.QueryEscape(domain)}
	a, err := d.send(ctx, c)
	if err != nil {
		return nil, err
	}
	var list vendorproto.SiteList
	if err := decode(a, &list); err != nil {
		return nil, d.failure(c, true, err)
	}
	if list.Data == nil {
		return nil, d.failure(c, true, errors.New("malformed answer: no data list"))
	}
	for _, s := range list.Data {
		if err := check(s); err != nil {
			return nil, d.failure(c, true, err)
		}
		if strings.EqualFold(s.Domain, domain) {
			site := fromWire(s)
			return &site, nil
		}
	}
	return nil, nil
}

// ListSites returns page number page (from 1) of all the vendor's sites, in
// id order, perPage to a page (the vendor caps it at 500), and the number of
// sites in all. A page past the last is empty. A read is never uncertain: a
// 4xx is a *licenses.RejectedError, any other failure unavailable.
func (d *HTTPDriver) ListSites(ctx context.Context, page, perPage int) ([]licenses.Site, int, error) {
	q := url.Values{"page": {strconv.Itoa(page)}, "per_page": {strconv.Itoa(perPage)}}
	c := call{Call: vendorproto.ListSites, path: vendorproto.ListSites.Pattern + "?" + q.Encode()}
	a, err := d.send(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	var list vendorproto.SitePage
	if err := decode(a, &list); err != nil {
		return nil, 0, d.failure(c, true, err)
	}
	if list.Data == nil {
		return nil, 0, d.failure(c, true, errors.New("malformed answer: no data list"))
	}
	if list.Meta == nil || list.Meta.Total == nil || *list.Meta.Total < 0 {
		return nil, 0, d.failure(c, true, errors.New("malformed answer: no meta.total"))
	}
	sites := make([]licenses.Site, 0, len(list.Data))
	for _, s := range list.Data {
		if err := check(s); err != nil {
			return nil, 0, d.failure(c, true, err)
		}
		sites = append(sites, fromWire(s))
	}
	return sites, *list.Meta.Total, nil
}

// CreateSite asks the vendor for a site. It is sent once: only a 429 is
// repeated, so any failure after sending is an *licenses.UncertainError.
func (d *HTTPDriver) CreateSite(ctx context.Context, name, domain string) (licenses.Site, error) {
	body, err := json.Marshal(vendorproto.NewSite{Name: name, Domain: domain})
	if err != nil {
		return licenses.Site{}, fmt.Errorf("encode site: %w", err)
	}
	return d.write(ctx, call{Call: vendorproto.CreateSite, path: vendorproto.CreateSite.Pattern, body: body})
}

// RotateKey asks the vendor for a new license key for the site. It is sent
// once, as a create is, and classified alike; the vendor's 404 is a
// *licenses.RejectedError that is also licenses.ErrVendorSiteNotFound.
func (d *HTTPDriver) RotateKey(ctx context.Context, siteID string) (licenses.Site, error) {
	site, err := d.write(ctx, call{Call: vendorproto.RotateKey, path: vendorproto.RotateKey.Path(siteID)})
	var rej *licenses.RejectedError
	if errors.As(err, &rej) && rej.Status == http.StatusNotFound {
		return licenses.Site{}, fmt.Errorf("%w: %w", licenses.ErrVendorSiteNotFound, err)
	}
	return site, err
}

func (d *HTTPDriver) write(ctx context.Context, c call) (licenses.Site, error) {
	a, err := d.send(ctx, c)
	if err != nil {
		return licenses.Site{}, err
	}
	var answer vendorproto.SiteData
	if err := decode(a, &answer); err != nil {
		return licenses.Site{}, d.failure(c, true, err)
	}
	if answer.Data == nil {
		return licenses.Site{}, d.failure(c, true, errors.New("malformed answer: no data"))
	}
	if err := check(*answer.Data); err != nil {
		return licenses.Site{}, d.failure(c, true, err)
	}
	return fromWire(*answer.Data), nil
}

// DeleteSite deletes the site; the vendor's 404 (already gone) is success.
func (d *HTTPDriver) DeleteSite(ctx context.Context, id string) error {
	_, err := d.send(ctx, call{Call: vendorproto.DeleteSite, path: vendorproto.DeleteSite.Path(id), gone: true})
	return err
}

func check(s vendorproto.Site) error {
	if s.ID == "" || s.LicenseKey == "" {
		return errors.New("malformed answer: a site without id or license_key")
	}
	return nil
}

func fromWire(s vendorproto.Site) licenses.Site {
	return licenses.Site{ID: s.ID, Name: s.Name, Domain: s.Domain, LicenseKey: s.LicenseKey, Status: s.Status}
}

// decode's errors never quote the body, which may hold license keys.
func decode(a *answer, v any) error {
	if a.bodyErr != nil {
		return fmt.Errorf("read answer: %w", a.bodyErr)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return nil
}
