package vendorsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
func loadState(path string, store *store) error {
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

func saveState(path string, store *store) error {
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
