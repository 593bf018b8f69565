package vendorclient

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"

	"github.com/licensor-api/licensor/config"
)

// NewInProcess builds the http driver on a vendor served by h in this
// process (the simulator, for VENDOR_DRIVER=fake): each request goes to
// h.ServeHTTP, with no socket, so the driver speaks the protocol to it just
// as it does over the network, with cfg's timeout and retry budget. The
// handler needs no VENDOR_URL and is sent no token.
func NewInProcess(h http.Handler, cfg config.Vendor, log *slog.Logger, opts ...Option) *HTTPDriver {
	cfg.URL, cfg.Token = "http://vendor.in-process", ""
	return newHTTP(cfg, inProcess{h}, log, opts)
}

// inProcess is a transport that hands each request to a handler and
// returns the answer it recorded.
type inProcess struct{ h http.Handler }

// RoundTrip serves req on the handler. As over a socket, a request whose
// caller already gave up is not sent (unavailable), and one given up while
// the handler held it has no answer (for a write, uncertain).
func (t inProcess) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders() // what the driver judges a failure by: from here on the vendor may act
	}
	in := req.Clone(ctx)
	if in.Body == nil {
		in.Body = http.NoBody // a server's request always has a body
	}
	in.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil { // http.ErrAbortHandler: the handler dropped the answer
			resp, err = nil, fmt.Errorf("in-process vendor gave no answer: %v", p)
		}
	}()
	t.h.ServeHTTP(rec, in)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp = rec.Result()
	resp.Request = req
	return resp, nil
}
