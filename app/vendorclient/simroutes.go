package vendorclient

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
)

// wireSite is a site as the vendor writes it.
type wireSite struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Domain     string `json:"domain"`
	LicenseKey string `json:"license_key"`
	Status     string `json:"status"`
	CreatedAt  string `json:"created_at"`
}

func toWire(r record) wireSite {
	return wireSite{ID: r.site.ID, Name: r.site.Name, Domain: r.site.Domain, LicenseKey: r.site.LicenseKey,
		Status: r.site.Status, CreatedAt: r.created.Format(time.RFC3339)}
}

// list answers GET /sites?domain=…; without a domain it lists every site.
func (s *Simulator) list(w http.ResponseWriter, r *http.Request) {
	sites := []wireSite{}
	for _, rec := range s.store.list(r.URL.Query().Get("domain")) {
		sites = append(sites, toWire(rec))
	}
	s.reply(w, r, http.StatusOK, map[string]any{"data": sites}, "")
}

// create answers POST /sites, then loses the answer if a drop is due.
func (s *Simulator) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name   string `json:"name"`
		Domain string `json:"domain"`
	}
	body, err := readAll(r)
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil {
		s.reply(w, r, http.StatusBadRequest, message("The body is not valid JSON."), "")
		return
	}
	rec, rej := s.store.create(in.Name, in.Domain)
	if rej != nil {
		s.reply(w, r, rej.Status, rejection(rej), "")
		return
	}
	if s.dropDue(&s.dropped, s.opts.DropCreates) {
		s.drop(w, r, "created")
		return
	}
	s.reply(w, r, http.StatusCreated, map[string]any{"data": toWire(rec)}, "")
}

// delete answers DELETE /sites/{id}: 204, or 404 for a site it does not
// hold; then loses the answer to a delete it committed if a drop is due.
func (s *Simulator) delete(w http.ResponseWriter, r *http.Request) {
	if !s.store.remove(r.PathValue("id")) {
		s.reply(w, r, http.StatusNotFound, message("Site not found."), "")
		return
	}
	if s.dropDue(&s.droppedDeletes, s.opts.DropDeletes) {
		s.drop(w, r, "deleted")
		return
	}
	s.reply(w, r, http.StatusNoContent, nil, "")
}

func rejection(rej *licenses.RejectedError) map[string]any {
	body := message(rej.Message)
	if len(rej.Fields) > 0 {
		body["errors"] = rej.Fields
	}
	return body
}

// dropDue counts a committed write against its drop budget (dropped of
// limit) and reports whether its answer is to be lost.
func (s *Simulator) dropDue(dropped *int, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *dropped >= limit {
		return false
	}
	*dropped++
	return true
}

// drop loses the answer to a write that was committed (done: "created",
// "deleted"): it holds the request until the client gives up (hang), or
// closes the connection (close).
func (s *Simulator) drop(w http.ResponseWriter, r *http.Request, done string) {
	s.opts.Log.Info("vendor-sim", "method", r.Method, "path", r.URL.Path, "status", 0, "fault", done+", answer dropped: "+s.opts.DropMode)
	if s.opts.DropMode == DropHang {
		<-r.Context().Done()
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2 cannot hijack; aborting drops the stream just the same
	}
	_ = conn.Close() // dropping the answer is the point
}
