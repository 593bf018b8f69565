package vendorsim

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// siteChanges are the changes POST /_sim/sites/{id}/{action} makes, by
// action, with the type of the event each sends.
var siteChanges = map[string]string{
	"suspend":    vendorproto.EventSiteSuspended,
	"reactivate": vendorproto.EventSiteReactivated,
	"delete":     vendorproto.EventSiteDeleted,
	"rotate":     vendorproto.EventSiteKeyRotated,
}

// changeSite answers POST /_sim/sites/{id}/{action}: it changes the site as
// the vendor would on its own (suspend, reactivate, delete, rotate its
// license key), saves the state and queues the event, which it answers
// (200): {"id":"evt_…","type":"site.…","created":unix,"data":{"site":…}},
// the site after the change (as it was, for a delete). An unknown site or
// action is a 404, a suspend of a suspended site or a reactivate of an
// active one a 409; neither sends an event.
func (s *Simulator) changeSite(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	kind, ok := siteChanges[action]
	if !ok {
		writeJSON(w, http.StatusNotFound, message("Unknown action "+action+": suspend, reactivate, delete or rotate."))
		return
	}
	var rec record
	var err error
	switch action {
	case "suspend":
		rec, err = s.store.setStatus(id, vendorproto.StatusSuspended)
	case "reactivate":
		rec, err = s.store.setStatus(id, vendorproto.StatusActive)
	case "rotate":
		rec, err = s.store.rotate(id)
	case "delete":
		rec, err = s.store.take(id)
	}
	switch {
	case errors.Is(err, errNoSite):
		writeJSON(w, http.StatusNotFound, message("Site not found."))
		return
	case err != nil:
		writeJSON(w, http.StatusConflict, message("The site is already "+rec.site.Status+"."))
		return
	}
	body := s.changed(kind, rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n')) // the client went away; nothing to do
}

// changed follows a change of kind to rec's site, whoever asked for it:
// it saves the state, and logs and queues the event, whose raw JSON it
// returns.
func (s *Simulator) changed(kind string, rec record) []byte {
	s.persist()
	e := vendorproto.Event{ID: "evt_" + strings.ToLower(rand.Text()), Type: kind, Created: s.hooks.cfg.Now().Unix(),
		Data: vendorproto.EventData{Site: &rec.site}}
	body, _ := json.Marshal(e) // plain data: it cannot fail
	s.opts.Log.Info("vendor-sim: site changed", "site", rec.site.ID, "domain", rec.site.Domain, "event", e.ID,
		"type", kind, "webhook", s.hooks.enabled())
	s.hooks.enqueue(simEvent{id: e.ID, kind: kind, site: rec.site.ID, body: body})
	return body
}
