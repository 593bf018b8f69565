package resource

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// License is a license as the API shows it (and as an event carries it).
type License = events.License

// NewLicense presents l.
func NewLicense(l licenses.License) License { return l.Resource() }

// NewLicenses presents ls, in their order.
func NewLicenses(ls []licenses.License) []License { return list(ls, NewLicense) }

// Data wraps a resource the way Laravel's API resources do: {"data": …}.
type Data struct {
	Data any `json:"data"`
}

// LicenseLocation is the path of a license, as a 201's Location header.
func LicenseLocation(id string) string { return "/api/licenses/" + id }

// LicenseCreated is the answer to a create: 201 with Location for a new
// license, 200 for one the consumer already held. The create and its
// resumption both render through it, so a reconciled intent replays the
// very bytes a normal success would have sent.
func LicenseCreated(lic licenses.License, created bool) (idempotency.Response, error) {
	body, err := Marshal(Data{Data: NewLicense(lic)})
	if err != nil {
		return idempotency.Response{}, err
	}
	resp := idempotency.Response{
		Status:  http.StatusOK,
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    body,
	}
	if created {
		resp.Status = http.StatusCreated
		resp.Headers["Location"] = LicenseLocation(lic.ID)
	}
	return resp, nil
}

// Marshal is json.Marshal without HTML escaping, and so every body the API
// writes: "&", "<" and ">" are written as they are, as Laravel's
// json_encode writes them ("AT&T", and the pagination labels "&laquo;
// Previous"), not as \u0026.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
