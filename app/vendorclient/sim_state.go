package vendorclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// ErrSimState marks a state file the simulator cannot read: a failure,
// not a mistake in its options.
var ErrSimState = errors.New("vendor-sim state file")

// simState is the state file: the sites, and the number the next id
// follows, so an id is never given twice.
type simState struct {
	Next  int                `json:"next"`
	Sites []vendorproto.Site `json:"sites"`
}

// loadState fills store from the state file (a file that does not exist
// yet is an empty vendor), then writes it back: a path it cannot write
// fails now, not at the first commit.
func loadState(path string, store *Fake) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	} else if err == nil {
		var st simState
		if err = json.Unmarshal(data, &st); err == nil {
			err = store.restore(st)
		}
	}
	if err == nil {
		err = saveState(path, store)
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrSimState, path, err)
	}
	return nil
}

// persist writes the sites to the state file, if there is one: the whole
// file, to a temporary file renamed over it, so a crash leaves the old
// state or the new one. Writes are serialized, and each takes its snapshot
// once it holds the turn, so the last write holds the latest state.
func (s *Simulator) persist() {
	if s.opts.StateFile == "" {
		return
	}
	s.save.Lock()
	defer s.save.Unlock()
	if err := saveState(s.opts.StateFile, s.store); err != nil {
		s.opts.Log.Error("vendor-sim: state not saved", "file", s.opts.StateFile, "err", err)
	}
}

// saveState writes store's sites to path.
func saveState(path string, store *Fake) error {
	data, err := json.MarshalIndent(store.snapshot(), "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(data, '\n'))
}

// writeAtomic replaces path with data (0600: it holds license keys).
func writeAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name()) // best effort: the error says what went wrong
		}
	}()
	if _, err = tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path) // CreateTemp made it 0600
}

// byID returns the site with the id.
func (f *Fake) byID(id string) (record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.sites[id]
	return r, ok
}

// snapshot returns the sites, oldest first, and the id counter.
func (f *Fake) snapshot() simState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := simState{Next: f.next, Sites: []vendorproto.Site{}}
	all := make([]record, 0, len(f.sites))
	for _, r := range f.sites {
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b record) int { return a.seq - b.seq })
	for _, r := range all {
		st.Sites = append(st.Sites, toWire(r))
	}
	return st
}

// restore replaces the sites with a snapshot's.
func (f *Fake) restore(st simState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sites, f.domains, f.next = map[string]record{}, map[string]string{}, st.Next
	for i, w := range st.Sites {
		created, err := time.Parse(time.RFC3339, w.CreatedAt)
		if err != nil || w.ID == "" || w.Domain == "" {
			return fmt.Errorf("site %d (%q) is malformed", i+1, w.ID)
		}
		key := strings.ToLower(w.Domain)
		if _, dup := f.domains[key]; dup {
			return fmt.Errorf("two sites for domain %q", w.Domain)
		}
		f.sites[w.ID] = record{site: licenses.Site{ID: w.ID, Name: w.Name, Domain: w.Domain, LicenseKey: w.LicenseKey,
			Status: w.Status}, created: created, seq: i + 1 - len(st.Sites)} // before any new site
		f.domains[key] = w.ID
		if n, err := strconv.Atoi(strings.TrimPrefix(w.ID, "site_")); err == nil && n > f.next {
			f.next = n // a hand-edited counter must not give an id twice
		}
	}
	return nil
}

// clear forgets every site; ids keep counting up.
func (f *Fake) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sites, f.domains = map[string]record{}, map[string]string{}
}
