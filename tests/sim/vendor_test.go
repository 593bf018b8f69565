package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// fault is what the schedule makes of one vendor call.
type fault uint8

// The vendor's faults, as the http driver would classify what the real
// vendor does.
const (
	faultNone        fault = iota // answered
	faultUnavailable              // a 503 before doing anything: *licenses.UnavailableError
	faultLost                     // done, the answer lost: *licenses.UncertainError for a write
	faultRateLimited              // a 429 with Retry-After, waited out (virtual time), then answered
	faultHang                     // held until a release, its process's crash or its caller's deadline
)

var faultNames = [...]string{"ok", "unavailable", "lost", "429", "hang"}

// String is the fault's name in the history.
func (f fault) String() string { return faultNames[f] }

// simSite is one of the vendor's sites.
type simSite struct {
	ID, Name, Domain, Key, Status string
	MadeBy                        int // the step whose request made it; -1: none (the reconciler, a settle)
}

// vendorCall is a call held by a hang fault.
type vendorCall struct {
	proc     int
	what     string        // "find acme.test", "create acme.test", …: for the history
	deadline time.Time     // its caller's (zero: none), which the http driver's call would not outlive
	release  chan fault    // what the release makes of it: faultNone (answered), faultLost, faultUnavailable
	done     chan struct{} // closed when the call has returned to its caller
}

// vendor is the simulated vendor: sites in memory, one per domain (a
// create for a domain that has a site is refused 422, as the real one
// does), every call counted, and each call's fault taken in turn from the
// schedule's list (faults off: every call answered). It implements
// licenses.Vendor for one process (see vendor.as).
type vendor struct {
	mu       sync.Mutex          // a safety net: the schedule runs one call at a time
	sites    map[string]*simSite // by domain
	next     int                 // the last site number given
	keys     int                 // the last license key number given
	faults   []fault             // the schedule's, one per call, in call order
	calls    int
	off      bool           // settle: no faults
	held     []*vendorCall  // hung calls, in the order they hung
	events   []vendorEvent  // every event the vendor sent, delivered or not
	counts   map[string]int // calls by kind (find, create, delete, rotate)
	eventSeq int
	// deleted is each site deleted (on the vendor's side or by a call),
	// with the licenses that held it then.
	deleted    map[string]map[string]bool
	ownDeletes map[string]bool // the sites deleted on the vendor's own side (site.deleted)
	// holders is the licenses holding a site now (the simulation's own
	// look at the database, through the process's read pool).
	holders func(proc int, site string) map[string]bool
	log     func(format string, args ...any) // the history's
	// forgetDeletes is a sabotage for the replay test: a delete answers
	// 204 and deletes nothing (a vendor bug, as a mutant is licensor's).
	forgetDeletes bool
}

// vendorEvent is an event of the vendor's, with its signed body.
type vendorEvent struct {
	ID        string
	Body      []byte
	Delivered bool
}

// newVendor is a vendor with no site, taking its faults from the list.
func newVendor(faults []fault) *vendor {
	return &vendor{sites: map[string]*simSite{}, faults: faults, counts: map[string]int{}, deleted: map[string]map[string]bool{}, ownDeletes: map[string]bool{},
		holders: func(int, string) map[string]bool { return nil }}
}

// procVendor is the vendor as one process's driver sees it.
type procVendor struct {
	v    *vendor
	proc int
	dead <-chan struct{} // closed when the process crashes
}

var _ licenses.Vendor = procVendor{}

// as is the vendor for process proc's driver; dead is closed when the
// process crashes (a 429's wait then ends at once).
func (v *vendor) as(proc int, dead <-chan struct{}) licenses.Vendor {
	return procVendor{v: v, proc: proc, dead: dead}
}

// fault takes the next call's fault.
func (v *vendor) fault() fault {
	v.calls++
	if v.off || v.calls > len(v.faults) {
		return faultNone
	}
	return v.faults[v.calls-1]
}

// call runs one call: do does the work and returns its answer; a fault
// decides whether it is done and whether its answer arrives.
func (p procVendor) call(ctx context.Context, what string, write bool, do func() error) error {
	v := p.v
	select {
	case <-p.dead: // a process that died sends nothing more
		return &licenses.UnavailableError{Err: errors.New(what + ": the process crashed")}
	default:
	}
	v.mu.Lock()
	v.counts[strings.Fields(what)[0]]++
	f := v.fault()
	// Each call's Retry-After is its own: two waits never end at the same
	// instant, when the Go scheduler, not the schedule, would order them.
	retryAfter := time.Second + time.Duration(v.calls)*time.Millisecond
	v.mu.Unlock()
	if f == faultRateLimited {
		// The driver waits out the Retry-After and asks again.
		if err := sleepCtx(ctx, p.dead, retryAfter); err != nil {
			return &licenses.UnavailableError{RetryAfter: retryAfter, Err: fmt.Errorf("%s: waiting out a 429: %w", what, err)}
		}
		f = faultNone
	}
	if f == faultHang {
		c := &vendorCall{proc: p.proc, what: what, release: make(chan fault, 1), done: make(chan struct{})}
		c.deadline, _ = ctx.Deadline()
		if v.log != nil {
			v.log("    vendor: p%d %s (held)", p.proc, what)
		}
		v.mu.Lock()
		v.held = append(v.held, c)
		v.mu.Unlock()
		defer close(c.done)
		f = <-c.release
	}
	if v.log != nil {
		v.log("    vendor: p%d %s (%s)", p.proc, what, f)
	}
	switch f {
	case faultUnavailable:
		return &licenses.UnavailableError{Err: fmt.Errorf("%s: 503 Service Unavailable", what)}
	case faultLost:
		v.mu.Lock()
		err := do()
		v.mu.Unlock()
		if !write {
			return &licenses.UnavailableError{Err: fmt.Errorf("%s: answer lost", what)}
		}
		_ = err // whatever it was, the answer is lost
		return &licenses.UncertainError{Err: fmt.Errorf("%s: connection reset after sending", what)}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return do()
}

// sleepCtx waits d, or until ctx ends or dead is closed.
func sleepCtx(ctx context.Context, dead <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-dead:
		return errors.New("the process crashed")
	}
}

// site is the site as the driver answers it.
func (s *simSite) site() licenses.Site {
	return licenses.Site{ID: s.ID, Name: s.Name, Domain: s.Domain, LicenseKey: s.Key, Status: s.Status}
}

// FindSite lists the domain's site.
func (p procVendor) FindSite(ctx context.Context, domain string) (*licenses.Site, error) {
	var found *licenses.Site
	err := p.call(ctx, "find "+domain, false, func() error {
		found = nil
		if s, ok := p.v.sites[domain]; ok {
			site := s.site()
			found = &site
		}
		return nil
	})
	return found, err
}

// CreateSite makes the domain's site, or refuses it 422 when it has one.
func (p procVendor) CreateSite(ctx context.Context, name, domain string) (licenses.Site, error) {
	var made licenses.Site
	err := p.call(ctx, "create "+domain, true, func() error {
		if _, ok := p.v.sites[domain]; ok {
			return &licenses.RejectedError{Status: http.StatusUnprocessableEntity, Message: "domain already has a site",
				Fields: map[string][]string{"domain": {"The domain already has a site."}}}
		}
		p.v.next++
		p.v.keys++
		s := &simSite{ID: fmt.Sprintf("site_%d", p.v.next), Name: name, Domain: domain,
			Key: fmt.Sprintf("LK-%04d", p.v.keys), Status: vendorproto.StatusActive, MadeBy: -1}
		if step, ok := ctx.Value(stepKey{}).(int); ok {
			s.MadeBy = step
		}
		p.v.sites[domain] = s
		made = s.site()
		return nil
	})
	return made, err
}

// DeleteSite deletes a site; one already gone counts as deleted.
func (p procVendor) DeleteSite(ctx context.Context, id string) error {
	return p.call(ctx, "delete "+id, true, func() error {
		if s := p.v.byID(id); s != nil && !p.v.forgetDeletes {
			delete(p.v.sites, s.Domain)
			p.v.deleted[s.ID] = p.v.holders(p.proc, s.ID)
		}
		return nil
	})
}

// RotateKey gives the site a new license key and sends site.key_rotated
// (undelivered until a deliver operation sends it).
func (p procVendor) RotateKey(ctx context.Context, siteID string) (licenses.Site, error) {
	var out licenses.Site
	err := p.call(ctx, "rotate "+siteID, true, func() error {
		s := p.v.byID(siteID)
		if s == nil {
			return fmt.Errorf("%w: %w", licenses.ErrVendorSiteNotFound,
				&licenses.RejectedError{Status: http.StatusNotFound, Message: "Site not found."})
		}
		p.v.keys++
		s.Key = fmt.Sprintf("LK-%04d", p.v.keys)
		out = s.site()
		return nil
	})
	return out, err
}

// byID is the site with the id, nil when the vendor holds none.
func (v *vendor) byID(id string) *simSite {
	for _, s := range v.sites {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// change is a change on the vendor's own side (kind: an event type) to the
// domain's site, with its event queued; false when the domain has no site.
func (v *vendor) change(kind, domain string, now time.Time) bool {
	s, ok := v.sites[domain]
	if !ok {
		return false
	}
	switch kind {
	case vendorproto.EventSiteSuspended:
		s.Status = vendorproto.StatusSuspended
	case vendorproto.EventSiteReactivated:
		s.Status = vendorproto.StatusActive
	case vendorproto.EventSiteKeyRotated:
		v.keys++
		s.Key = fmt.Sprintf("LK-%04d", v.keys)
	case vendorproto.EventSiteDeleted:
		delete(v.sites, domain)
		v.deleted[s.ID] = v.holders(0, s.ID)
		v.ownDeletes[s.ID] = true
	}
	v.eventSeq++
	ws := vendorproto.Site{ID: s.ID, Name: s.Name, Domain: s.Domain, LicenseKey: s.Key, Status: s.Status,
		CreatedAt: now.UTC().Format(time.RFC3339)}
	body, _ := json.Marshal(vendorproto.Event{ID: fmt.Sprintf("evt_%04d", v.eventSeq), Type: kind, Created: now.Unix(),
		Data: vendorproto.EventData{Site: &ws}})
	v.events = append(v.events, vendorEvent{ID: fmt.Sprintf("evt_%04d", v.eventSeq), Body: body})
	return true
}

// tally is the calls by kind, for the history.
func (v *vendor) tally() string {
	kinds := make([]string, 0, len(v.counts))
	for k := range v.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s%s %d", map[bool]string{true: ", "}[b.Len() > 0], k, v.counts[k])
	}
	return b.String()
}

// domains is every domain with a site, sorted.
func (v *vendor) domains() []string {
	var out []string
	for d := range v.sites {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
