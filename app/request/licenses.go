package request

import (
	"encoding/json"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/fault"
)

// StoreLicense is the body of POST /api/licenses.
type StoreLicense struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
}

// storeLicenseRules is the order of a create's validation rules.
var storeLicenseRules = []string{"name", "domain"}

// BindStoreLicense parses and validates a create, once: the validated input,
// and the intent that fingerprints it — the name and the normalised domain,
// so "ACME.test." and "acme.test" are one intent and extra fields a client
// adds do not make a retry a conflict.
//
// Every field is checked, in rule order (name, then domain), and every
// failing field is reported, as Laravel's validator does: a value of the
// wrong JSON type is "The name field must be a string." and does not hide
// the other fields' errors. The error is a *fault.Fields (MergeFields).
func BindStoreLicense(contentType string, body []byte) (licenses.Input, []byte, error) {
	if err := CheckJSON(contentType); err != nil {
		return licenses.Input{}, nil, err
	}
	raw, err := Object(body)
	if err != nil {
		return licenses.Input{}, nil, err
	}
	types := &fault.Fields{}
	var in licenses.Input
	bindString(raw, types, "name", false, &in.Name)
	bindString(raw, types, "domain", false, &in.Domain)
	in, err = licenses.Validate(in)
	if err == nil && len(types.Fields) == 0 {
		intent, err := json.Marshal(StoreLicense{Name: in.Name, Domain: in.Domain})
		return in, intent, err
	}
	return licenses.Input{}, nil, MergeFields(types, err, storeLicenseRules)
}

// StoredStoreLicense reads back the intent BindStoreLicense made, as a
// record keeps it, for a create to be finished without its client.
func StoredStoreLicense(intent []byte) (licenses.Input, error) {
	var req StoreLicense
	if err := json.Unmarshal(intent, &req); err != nil {
		return licenses.Input{}, err
	}
	return licenses.Input{Name: req.Name, Domain: req.Domain}, nil
}

// LicenseIntent is the intent of a request whose one input is a license's
// id (a key rotation): the id, so that one Idempotency-Key sent for another
// license is another intent, refused as a key reused.
func LicenseIntent(id string) []byte {
	intent, _ := json.Marshal(map[string]string{"license_id": id}) // a map of strings always marshals
	return intent
}
