package vendorsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// The /_sim/ routes report and steer a running simulator. They take the
// same bearer token as the vendor routes (when one is set), suffer no
// fault, and are not counted.
//
//	GET  /_sim/stats   SimStats as JSON
//	GET  /_sim/faults  the faults in force (faultsJSON)
//	POST   /_sim/faults  merges the knobs given into those in force; a knob left out stays as it is
//	DELETE /_sim/faults  clears every fault (each knob to its default: no fault)
//	POST /_sim/reset   forgets every site and zeroes the stats; faults unchanged
//	POST /_sim/sites/{id}/{action}  suspend, reactivate, delete or rotate: a webhook event (sitechanges.go)
func (s *Simulator) adminRoutes() {
	s.admin("GET /_sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	s.admin("GET /_sim/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, toFaultsJSON(s.Faults()))
	})
	s.admin("POST /_sim/faults", s.mergeFaults)
	s.admin("DELETE /_sim/faults", s.clearFaults)
	s.admin("POST /_sim/sites/{id}/{action}", s.changeSite)
	s.admin("POST /_sim/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		s.opts.Log.Info("vendor-sim: reset", "sites", 0)
		writeJSON(w, http.StatusOK, s.Stats())
	})
}

func (s *Simulator) admin(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			writeJSON(w, http.StatusUnauthorized, message("Unauthenticated."))
			return
		}
		h(w, r)
	})
}

// faultsJSON is SimFaults on the wire: the flags' names with "_" for "-",
// durations as Go writes them ("150ms"), retry_after in seconds.
type faultsJSON struct {
	Latency     string  `json:"latency"`
	Jitter      string  `json:"jitter"`
	Burst429    int     `json:"429_burst"`
	RetryAfter  int     `json:"retry_after"`
	Rate429     float64 `json:"429_rate"`
	Rate5xx     float64 `json:"5xx_rate"`
	DropRate    float64 `json:"drop_rate"`
	DropCreates int     `json:"drop_creates"`
	DropDeletes int     `json:"drop_deletes"`
	DropMode    string  `json:"drop_mode"`
	FaultPhase  string  `json:"fault_phase"`
	Seed        *uint64 `json:"seed"`
}

func toFaultsJSON(f SimFaults, seed uint64) faultsJSON {
	return faultsJSON{Latency: f.Latency.String(), Jitter: f.Jitter.String(), Burst429: f.Burst429,
		RetryAfter: int((f.RetryAfter + time.Second - 1) / time.Second), Rate429: f.Rate429, Rate5xx: f.Rate5xx,
		DropRate: f.DropRate, DropCreates: f.DropCreates, DropDeletes: f.DropDeletes, DropMode: f.DropMode,
		FaultPhase: f.FaultPhase, Seed: &seed}
}

// mergeFaults answers POST /_sim/faults (see adminRoutes). The budgets count
// afresh; a "seed" restarts the random sequence, else it goes on. A body it
// cannot take changes nothing.
func (s *Simulator) mergeFaults(w http.ResponseWriter, r *http.Request) {
	current, _ := s.Faults()
	in := toFaultsJSON(current, 0)
	in.Seed = nil // only a seed the body names restarts the sequence
	body, err := readAll(r)
	if err != nil {
		return // the client went away
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		if err == nil {
			err = errors.New("more than one JSON value")
		}
		writeJSON(w, http.StatusBadRequest, message("The body is not the faults' JSON: "+err.Error()))
		return
	}
	f := SimFaults{Burst429: in.Burst429, RetryAfter: time.Duration(in.RetryAfter) * time.Second, Rate429: in.Rate429,
		Rate5xx: in.Rate5xx, DropRate: in.DropRate, DropCreates: in.DropCreates, DropDeletes: in.DropDeletes,
		DropMode: in.DropMode, FaultPhase: in.FaultPhase}
	if in.RetryAfter == toFaultsJSON(current, 0).RetryAfter {
		f.RetryAfter = current.RetryAfter // left as it is: keep a sub-second value the wire rounds
	}
	if f.Latency, err = time.ParseDuration(in.Latency); err == nil {
		f.Jitter, err = time.ParseDuration(in.Jitter)
	}
	if err == nil {
		f, err = f.normalized()
	}
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, message(err.Error()))
		return
	}
	s.setFaults(f)
	if in.Seed != nil {
		s.reseed(*in.Seed)
	}
	s.answerFaults(w, "vendor-sim: faults replaced")
}

// clearFaults answers DELETE /_sim/faults; the random sequence goes on.
func (s *Simulator) clearFaults(w http.ResponseWriter, _ *http.Request) {
	s.setFaults(SimFaults{RetryAfter: time.Second, DropMode: DropHang, FaultPhase: PhaseBefore})
	s.answerFaults(w, "vendor-sim: faults cleared")
}

func (s *Simulator) answerFaults(w http.ResponseWriter, msg string) {
	now := toFaultsJSON(s.Faults())
	logged, _ := json.Marshal(now) // plain data: it cannot fail
	s.opts.Log.Info(msg, "faults", string(logged))
	writeJSON(w, http.StatusOK, now)
}

// Reset forgets every site (ids keep counting up, so no id is given twice),
// zeroes the stats, counts the 429 burst and the drop budgets afresh and
// restarts the random sequence from its seed: as if the simulator had just
// started with the faults in force. The faults are unchanged, and so are
// the webhooks queued: only their counts of deliveries are zeroed.
func (s *Simulator) Reset() {
	s.store.clear()
	s.persist()
	s.mu.Lock()
	s.calls, s.stats = map[string]int{}, simCounters{}
	s.served, s.droppedCreates, s.droppedDeletes = 0, 0, 0
	seed := s.seed
	s.mu.Unlock()
	s.reseed(seed)
	s.hooks.zero()
}
