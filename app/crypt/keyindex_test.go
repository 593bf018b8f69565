package crypt

import (
	"bytes"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// KeyIndex names the key that opens a value, numbered as the keys were
// given (0 the current one), without opening it for the caller: the index
// of a key given first as a previous key (the first step of a rotation)
// and later as the current one follows it.
func TestKeyIndex(t *testing.T) {
	c := mustNew(t, keyB, keyA, keyC)
	seal := func(key []byte) string {
		t.Helper()
		v, err := mustNew(t, key).Encrypt([]byte("LK-value"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		key  []byte
		want int
	}{{"current", keyB, 0}, {"first previous", keyA, 1}, {"second previous", keyC, 2}} {
		if got, err := c.KeyIndex(seal(tc.key)); err != nil || got != tc.want {
			t.Errorf("%s: KeyIndex = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if got, err := mustNew(t, keyA, keyB).KeyIndex(seal(keyB)); err != nil || got != 1 {
		t.Errorf("a key held only as a previous key: KeyIndex = %d, %v; want 1", got, err)
	}
	unknown := seal(bytes.Repeat([]byte{0xD4}, KeySize))
	if got, err := c.KeyIndex(unknown); !errors.Is(err, ErrDecrypt) || got != -1 {
		t.Errorf("a value under no configured key: KeyIndex = %d, %v; want -1, ErrDecrypt", got, err)
	} else if strings.Contains(err.Error(), unknown) {
		t.Errorf("the error shows the value: %v", err)
	}
	for _, s := range []string{"LK-plaintext", "", envelopePrefix + "!!!"} {
		if got, err := c.KeyIndex(s); !errors.Is(err, ErrInvalid) || got != -1 {
			t.Errorf("KeyIndex(%q) = %d, %v; want -1, ErrInvalid", s, got, err)
		}
	}
	if n := c.PreviousKeys(); n != 2 {
		t.Errorf("PreviousKeys = %d, want 2", n)
	}
	if n := mustNew(t, keyA).PreviousKeys(); n != 0 {
		t.Errorf("PreviousKeys without previous keys = %d, want 0", n)
	}
}

// A fingerprint is 8 hex characters, the same for one key whatever its
// place, different for two keys, and no prefix of anything the key derives
// for encryption or digests, nor of the key itself.
func TestKeyFingerprint(t *testing.T) {
	c := mustNew(t, keyB, keyA)
	again := mustNew(t, keyA, keyB)
	hex8 := regexp.MustCompile(`^[0-9a-f]{8}$`)
	for i := range 2 {
		if fp := c.Fingerprint(i); !hex8.MatchString(fp) {
			t.Errorf("Fingerprint(%d) = %q, want 8 hex characters", i, fp)
		}
	}
	if c.Fingerprint(0) == c.Fingerprint(1) {
		t.Error("two keys have one fingerprint")
	}
	if c.Fingerprint(0) != again.Fingerprint(1) || c.Fingerprint(1) != again.Fingerprint(0) {
		t.Error("a key's fingerprint depends on its place")
	}
	if c.Fingerprint(2) != "" || c.Fingerprint(-1) != "" {
		t.Error("a fingerprint for a key that is not there")
	}
	for _, secret := range []string{hex.EncodeToString(keyB), hex.EncodeToString(c.digest), c.Digest("")} {
		if strings.Contains(secret, c.Fingerprint(0)) {
			t.Errorf("the fingerprint %s is part of %s", c.Fingerprint(0), secret)
		}
	}
}
