// Package vendorproto is the upstream vendor's wire protocol, and its only
// home: the shapes of the JSON the vendor and licensor exchange, the names
// of the vendor's events, and the header that signs its webhooks. The http
// driver (app/vendorclient), the webhook receiver (app/http) and the
// simulator (app/vendorsim) all speak it through this package, so a change
// to the protocol is a change here. The signature scheme's home is
// internal/hmacsig, which Sign and Verify forward to.
//
// The protocol is JSON over HTTP under VENDOR_URL, each request with
// "Authorization: Bearer VENDOR_TOKEN". Its calls are Calls, each with its
// method, path, success and answers (wire.go). A 4xx carries an ErrorBody;
// a 429 or a 503 may carry Retry-After.
//
// When the vendor changes a site on its own side it POSTs an Event to the
// receiver's URL, signed with Sign in the SignatureHeader.
package vendorproto
