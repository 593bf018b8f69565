package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
)

// Why an attempt failed, as the consumer is shown it (an attempt's error):
// a class, never an address, a port's state beyond it, or any text of the
// network's. The operator's log has the detail (see post).
const (
	// FailureTimeout: no answer within WEBHOOK_TIMEOUT (connecting, the TLS
	// handshake or the answer's headers).
	FailureTimeout = "timeout"
	// FailureConnectionRefused: the address refused the connection.
	FailureConnectionRefused = "connection_refused"
	// FailureConnectionReset: the connection was reset or closed before an
	// answer came.
	FailureConnectionReset = "connection_reset"
	// FailureTLS: the TLS handshake failed (a certificate not trusted or not
	// for the host, a protocol error, plain HTTP on an https:// URL).
	FailureTLS = "tls"
	// FailureDNS: the URL's host name did not resolve.
	FailureDNS = "dns"
	// FailureAddressNotAllowed: the host resolved to an address the address
	// rule refuses (not public, and in no allowed range).
	FailureAddressNotAllowed = "address_not_allowed"
	// FailureHTTPStatus: an answer that is neither a 2xx nor a 3xx (its
	// status is the attempt's response_status).
	FailureHTTPStatus = "http_status"
	// FailureRedirect: a 3xx, which is never followed.
	FailureRedirect = "redirect"
	// FailureInternal: licensor could not make the attempt (the event or
	// the endpoint's secret could not be read): none was sent.
	FailureInternal = "internal_error"
	// FailureOther: the request failed in any other way (no route to the
	// host, an answer that is not HTTP).
	FailureOther = "other"
)

// Failures are every class an attempt's error may be: a closed set, which
// docs/openapi.yaml lists.
var Failures = []string{FailureTimeout, FailureConnectionRefused, FailureConnectionReset, FailureTLS, FailureDNS,
	FailureAddressNotAllowed, FailureHTTPStatus, FailureRedirect, FailureInternal, FailureOther}

// classify is the class of err, an error of the deliveries' client. The
// order matters where one error is two things: a refused address is never
// dialled, and a name that timed out resolving failed in DNS.
func classify(err error) string {
	var (
		dnsErr       *net.DNSError
		netErr       net.Error
		certErr      *tls.CertificateVerificationError
		recordErr    tls.RecordHeaderError
		alertErr     tls.AlertError
		authorityErr x509.UnknownAuthorityError
		hostnameErr  x509.HostnameError
		invalidErr   x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrAddressNotAllowed):
		return FailureAddressNotAllowed
	case errors.As(err, &dnsErr):
		return FailureDNS
	case errors.As(err, &netErr) && netErr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return FailureTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailureConnectionRefused
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr), errors.As(err, &authorityErr),
		errors.As(err, &hostnameErr), errors.As(err, &invalidErr), errors.Is(err, http.ErrSchemeMismatch):
		return FailureTLS
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return FailureConnectionReset
	}
	return FailureOther
}

// detail is err for the operator's log: without the URL that a
// *url.Error adds (its query may hold a secret of the consumer's).
func detail(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Op + ": " + uerr.Err.Error()
	}
	return err.Error()
}
