package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const keyFile = "app.key"

var errProductionKey = errors.New("config: APP_KEY: is required in production; generate one with: echo base64:$(head -c 32 /dev/urandom | base64)")

// loadKey sets c.Key from APP_KEY, or, in local, from storage/app.key when
// it is there (CreateKey makes it). In testing a missing key is ephemeral;
// production refuses to start without one.
func (c *Config) loadKey(raw string) error {
	if raw != "" {
		key, err := DecodeKey(raw)
		if err != nil {
			return fmt.Errorf("config: APP_KEY: %w", err)
		}
		c.Key, c.KeySource = key, "env"
		return nil
	}
	switch c.Env {
	case EnvProduction:
		return errProductionKey
	case EnvTesting:
		c.Key, c.KeySource = NewKey(), "ephemeral"
		return nil
	}
	key, err := readKeyFile(filepath.Join(c.StorageDir, keyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil // CreateKey makes it
	}
	return c.keyFrom(key, err)
}

// CreateKey makes the local key file (storage/app.key, mode 0600) when Read
// found no key; otherwise it does nothing.
func (c *Config) CreateKey() error {
	if c.Key != nil || c.Env != EnvLocal {
		return nil
	}
	return c.keyFrom(localKey(filepath.Join(c.StorageDir, keyFile)))
}

func (c *Config) keyFrom(key []byte, err error) error {
	var se storageError
	if errors.As(err, &se) {
		return fmt.Errorf("config: APP_STORAGE: %s cannot hold the generated %s: %w (fix APP_STORAGE, or set APP_KEY)", c.StorageDir, keyFile, se.err)
	}
	if err != nil {
		return fmt.Errorf("config: APP_KEY: %w", err)
	}
	c.Key, c.KeySource = key, "file"
	return nil
}

// storageError is a failure of the storage directory itself (it cannot be
// made, read or written), which is APP_STORAGE's fault, not APP_KEY's.
type storageError struct{ err error }

func (e storageError) Error() string { return e.err.Error() }
func (e storageError) Unwrap() error { return e.err }

// localKey reads the key file, creating it (mode 0600) when it is missing.
// Several processes may start at once on a fresh checkout: the key is
// written whole to a temporary file and linked into place, so exactly one
// key wins and nobody reads a half-written file.
func localKey(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, storageError{err}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".app.key-*")
	if err != nil {
		return nil, storageError{err}
	}
	defer os.Remove(tmp.Name())
	key = NewKey()
	_, err = tmp.WriteString(EncodeKey(key) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, storageError{err}
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return readKeyFile(path) // another process won: use its key
	} else if err != nil {
		return nil, storageError{err}
	}
	return key, nil
}

// readKeyFile reads an existing key file, refusing one that others can read.
func readKeyFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			err = storageError{err} // e.g. the directory cannot be searched
		}
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %o): run chmod 600 %s", path, info.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := DecodeKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (delete it to generate a new key; tokens signed with the old one stop working)", path, err)
	}
	return key, nil
}

// NewKey returns 32 random bytes.
func NewKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	return key
}

// EncodeKey renders a key in APP_KEY's form, base64:<32 bytes>.
func EncodeKey(key []byte) string {
	return "base64:" + base64.StdEncoding.EncodeToString(key)
}

// DecodeKey parses APP_KEY's form, base64:<32 bytes>.
func DecodeKey(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "base64:")
	if !ok {
		return nil, errors.New("must look like base64:<32 bytes in base64>")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) != 32 {
		return nil, errors.New("must decode to exactly 32 bytes")
	}
	return key, nil
}

// keys parses a comma list of keys in APP_KEY's form, skipping empty entries
// as Laravel does. An error names the entry's position, never its value.
func (v *values) keys(name string) [][]byte {
	var keys [][]byte
	for i, raw := range strings.Split(v.str(name, ""), ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		key, err := DecodeKey(raw)
		if err != nil {
			v.fail(name, "entry %d %v", i+1, err)
			continue
		}
		keys = append(keys, key)
	}
	return keys
}
