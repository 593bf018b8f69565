package vendorproto_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// TestWireNames: the JSON names are the vendor's, as docs/operations.md
// shows them.
func TestWireNames(t *testing.T) {
	site := vendorproto.Site{ID: "site_1", Name: "Acme", Domain: "acme.test", LicenseKey: "LK-1",
		Status: vendorproto.StatusSuspended, CreatedAt: "2026-01-01T00:00:00Z"}
	const siteJSON = `{"id":"site_1","name":"Acme","domain":"acme.test","license_key":"LK-1","status":"suspended","created_at":"2026-01-01T00:00:00Z"}`
	total := 7
	for name, tt := range map[string]struct {
		v    any
		want string
	}{
		"site":         {site, siteJSON},
		"list":         {vendorproto.SiteList{Data: []vendorproto.Site{site}}, `{"data":[` + siteJSON + `]}`},
		"page":         {vendorproto.SitePage{Data: []vendorproto.Site{}, Meta: &vendorproto.PageMeta{Page: 2, PerPage: 5, Total: &total}}, `{"data":[],"meta":{"page":2,"per_page":5,"total":7}}`},
		"new site":     {vendorproto.NewSite{Name: "Acme", Domain: "acme.test"}, `{"name":"Acme","domain":"acme.test"}`},
		"created site": {vendorproto.SiteData{Data: &site}, `{"data":` + siteJSON + `}`},
		"refusal":      {vendorproto.ErrorBody{Message: "The given data was invalid.", Errors: map[string][]string{"name": {"The name field is required."}}}, `{"message":"The given data was invalid.","errors":{"name":["The name field is required."]}}`},
		"failure":      {vendorproto.ErrorBody{Message: "Server Error"}, `{"message":"Server Error"}`},
		"event": {vendorproto.Event{ID: "evt_1", Type: vendorproto.EventSiteSuspended, Created: 1767225600, Data: vendorproto.EventData{Site: &site}},
			`{"id":"evt_1","type":"site.suspended","created":1767225600,"data":{"site":` + siteJSON + `}}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(tt.v)
			if err != nil || string(got) != tt.want {
				t.Errorf("= %s, %v; want %s", got, err, tt.want)
			}
			back := reflect.New(reflect.TypeOf(tt.v))
			if err := json.Unmarshal(got, back.Interface()); err != nil || !reflect.DeepEqual(back.Elem().Interface(), tt.v) {
				t.Errorf("decoded back = %+v, %v; want %+v", back.Elem().Interface(), err, tt.v)
			}
		})
	}
}

// TestAbsentIsNil: a reader can tell an answer without its list, meta,
// total, site or event site from an empty one.
func TestAbsentIsNil(t *testing.T) {
	var list vendorproto.SiteList
	if err := json.Unmarshal([]byte(`{"data":[]}`), &list); err != nil || list.Data == nil {
		t.Errorf(`{"data":[]}: Data = %#v, %v; want empty, not nil`, list.Data, err)
	}
	for _, body := range []string{`{}`, `{"data":null}`} {
		var list vendorproto.SiteList
		if err := json.Unmarshal([]byte(body), &list); err != nil || list.Data != nil {
			t.Errorf("%s: Data = %#v, %v; want nil", body, list.Data, err)
		}
	}
	var page vendorproto.SitePage
	if err := json.Unmarshal([]byte(`{"data":[],"meta":{"page":1}}`), &page); err != nil || page.Meta == nil || page.Meta.Total != nil {
		t.Errorf("meta without total: %+v, %v; want a meta with a nil Total", page.Meta, err)
	}
	page = vendorproto.SitePage{}
	if err := json.Unmarshal([]byte(`{"data":[]}`), &page); err != nil || page.Meta != nil {
		t.Errorf("no meta: %+v, %v; want nil", page.Meta, err)
	}
	var created vendorproto.SiteData
	if err := json.Unmarshal([]byte(`{}`), &created); err != nil || created.Data != nil {
		t.Errorf("no data: %+v, %v; want nil", created.Data, err)
	}
	var ev vendorproto.Event
	if err := json.Unmarshal([]byte(`{"id":"evt_1","data":{}}`), &ev); err != nil || ev.Data.Site != nil {
		t.Errorf("no site: %+v, %v; want nil", ev.Data.Site, err)
	}
}
