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

// loadKey sets c.Key from APP_KEY, or, in local, from storage/app.key,
// generating that file once. In testing a missing key is ephemeral;
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
		return errors.New("config: APP_KEY: is required in production; generate one with: echo base64:$(head -c 32 /dev/urandom | base64)")
	case EnvTesting:
		c.Key, c.KeySource = NewKey(), "ephemeral"
		return nil
	}
	key, err := localKey(filepath.Join(c.StorageDir, keyFile))
	if err != nil {
		return fmt.Errorf("config: APP_KEY: %w", err)
	}
	c.Key, c.KeySource = key, "file"
	return nil
}

// localKey reads the key file, creating it (mode 0600) when it is missing.
func localKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return DecodeKey(strings.TrimSpace(string(b)))
	}
	if !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	key := NewKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(EncodeKey(key) + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
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
