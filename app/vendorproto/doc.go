// Package vendorproto is the upstream vendor's wire protocol, and its only
// home: the shapes of the JSON the vendor and licensor exchange, the names
// of the vendor's events, and the header that signs its webhooks. The http
// driver (app/vendorclient), the webhook receiver (app/http) and the
// simulator (app/vendorsim) all speak it through this package, so a change
// to the protocol is a change here. The signature scheme's home is
// internal/hmacsig, which Sign and Verify forward to.
//
// The protocol is JSON over HTTP under VENDOR_URL, each request with
// "Authorization: Bearer VENDOR_TOKEN":
//
//   - GET /sites?domain=D lists the domain's sites: 200, SiteList.
//   - GET /sites?page=N&per_page=M lists every site a page at a time, oldest
//     first: 200, SitePage. page defaults to 1, per_page to DefaultPerPage
//     and is capped at MaxPerPage; either below 1 is a 422.
//   - POST /sites with a NewSite creates one: 201, SiteData; 422 when the
//     domain already has a site, or the name or the domain is missing.
//   - DELETE /sites/{id} deletes one: 204; 404 when it is already gone.
//   - POST /sites/{id}/rotate-key (RotateKeyPath), without a body, gives the
//     site a new license key: 200, SiteData; 404 for a site it does not hold.
//     The vendor also sends the EventSiteKeyRotated event.
//   - A 4xx carries an ErrorBody; a 429 or a 503 may carry Retry-After.
//
// When the vendor changes a site on its own side it POSTs an Event to the
// receiver's URL, signed with Sign in the SignatureHeader.
package vendorproto
