// Package crypt keeps secrets encrypted at rest, in the envelope Laravel's
// Encrypter writes for AES-256-GCM (the encrypted casts): the base64 of
//
//	{"iv":"<12-byte nonce>","value":"<ciphertext>","mac":"","tag":"<16-byte GCM tag>"}
//
// with no associated data and an empty mac (the GCM tag authenticates the
// ciphertext). Unlike Laravel, the AES key is derived from APP_KEY with
// HKDF-SHA256, so the same secret never keys two algorithms (encryption,
// and the HMAC of Digest). A Cipher decrypts under the current key, then
// each previous one (APP_PREVIOUS_KEYS), so keys rotate without downtime.
// No error of this package carries key material, plaintext or the envelope.
package crypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/licensor-api/licensor/internal/fault"
)

// KeySize is the size of APP_KEY and of every previous key.
const KeySize = 32

const (
	infoEncryption  = "licensor encryption v1"
	infoDigest      = "licensor key digest v1"
	infoFingerprint = "licensor key fingerprint v1"
	nonceSize       = 12 // openssl_cipher_iv_length('aes-256-gcm')
	tagSize         = 16 // Laravel refuses any other tag length
	digestBytes     = 6  // 12 hex characters
	fingerprintLen  = 4  // 8 hex characters
)

// envelopePrefix is how every envelope begins: the base64 of `{"iv":`, six
// bytes, so exactly eight characters whatever follows.
const envelopePrefix = "eyJpdiI6"

// Errors of Decrypt.
var (
	// ErrInvalid means the value is not a well-formed envelope.
	ErrInvalid = errors.New("crypt: the payload is invalid")
	// ErrDecrypt means no configured key opens the envelope: it was sealed
	// under another key, or it was tampered with. Its code, key_unavailable,
	// is the class an intent's attempt history records.
	ErrDecrypt error = fault.New("key_unavailable", "crypt: could not decrypt the data with any configured key")
)

// Cipher encrypts and decrypts values at rest, and digests them for logs.
// It is safe for concurrent use.
type Cipher struct {
	keys         []cipher.AEAD // the current key first, then the previous ones
	fingerprints []string      // each key's Fingerprint, in the order of keys
	digest       []byte        // the HMAC key of Digest, derived from the current key
}

// New returns a Cipher that encrypts under current and decrypts under
// current, then each of previous. Every key must be KeySize bytes.
func New(current []byte, previous ...[]byte) (*Cipher, error) {
	c := &Cipher{}
	for i, key := range append([][]byte{current}, previous...) {
		name := "the current key"
		if i > 0 {
			name = fmt.Sprintf("previous key %d", i)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("crypt: %s must be %d bytes", name, KeySize)
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("crypt: %s: %w", name, err)
		}
		fp, err := hkdf.Key(sha256.New, key, nil, infoFingerprint, fingerprintLen)
		if err != nil {
			return nil, fmt.Errorf("crypt: %s: %w", name, err)
		}
		c.keys = append(c.keys, aead)
		c.fingerprints = append(c.fingerprints, hex.EncodeToString(fp))
	}
	digest, err := hkdf.Key(sha256.New, current, nil, infoDigest, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("crypt: derive the digest key: %w", err)
	}
	c.digest = digest
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	derived, err := hkdf.Key(sha256.New, key, nil, infoEncryption, KeySize)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(derived)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block) // a 12-byte nonce and a 16-byte tag
}

// envelope is Laravel's payload, in its order (compact('iv', 'value', 'mac',
// 'tag')): Go's encoder escapes no base64, so the JSON is byte for byte
// PHP's json_encode with JSON_UNESCAPED_SLASHES.
type envelope struct {
	IV    string `json:"iv"`
	Value string `json:"value"`
	MAC   string `json:"mac"`
	Tag   string `json:"tag"`
}

// Encrypt seals plain under the current key, with a fresh random nonce.
func (c *Cipher) Encrypt(plain []byte) (string, error) {
	nonce := make([]byte, nonceSize)
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	sealed := c.keys[0].Seal(nil, nonce, plain, nil)
	ct, tag := sealed[:len(sealed)-tagSize], sealed[len(sealed)-tagSize:]
	js, err := json.Marshal(envelope{
		IV:    base64.StdEncoding.EncodeToString(nonce),
		Value: base64.StdEncoding.EncodeToString(ct),
		MAC:   "",
		Tag:   base64.StdEncoding.EncodeToString(tag),
	})
	if err != nil { // four strings always encode
		return "", errors.New("crypt: could not encrypt the data")
	}
	return base64.StdEncoding.EncodeToString(js), nil
}

// Decrypt opens an envelope: ErrInvalid when s is none, ErrDecrypt when no
// key opens it.
func (c *Cipher) Decrypt(s string) ([]byte, error) {
	plain, _, err := c.open(s)
	return plain, err
}

// KeyIndex says which key opens the envelope s: 0 for the current key, n
// for the n-th previous one, -1 with Decrypt's error (plaintext written
// before encryption at rest is ErrInvalid: ask Encrypted first).
func (c *Cipher) KeyIndex(s string) (int, error) {
	_, key, err := c.open(s)
	return key, err
}

// PreviousKeys is how many previous keys the Cipher decrypts with.
func (c *Cipher) PreviousKeys() int { return len(c.keys) - 1 }

// Fingerprint names key i (as KeyIndex numbers them) in a listing: 8 hex
// characters of HKDF-SHA256 under an info of its own, one-way and alike on
// every replica, so operators compare configurations without showing a
// key. "" when there is no key i.
func (c *Cipher) Fingerprint(i int) string {
	if i < 0 || i >= len(c.fingerprints) {
		return ""
	}
	return c.fingerprints[i]
}

// Reseal is one step of a key rotation: s sealed under the current key,
// and whether that changed it. Envelopes of previous keys and plaintext
// written before encryption at rest are sealed anew; an envelope no key
// opens is an error.
func (c *Cipher) Reseal(s string) (string, bool, error) {
	if !Encrypted(s) {
		out, err := c.Encrypt([]byte(s))
		return out, err == nil, err
	}
	plain, key, err := c.open(s)
	if err != nil {
		return "", false, err
	}
	if key == 0 {
		return s, false, nil
	}
	out, err := c.Encrypt(plain)
	return out, err == nil, err
}

// Encrypted is the package's Encrypted, for callers that hold a Cipher.
func (c *Cipher) Encrypted(s string) bool { return Encrypted(s) }

// Encrypted reports whether s is meant as an envelope rather than plaintext
// written before encryption at rest: it begins as every envelope does.
// Whether it opens is Decrypt's to say, so a tampered envelope is refused,
// never taken for plaintext.
func Encrypted(s string) bool { return strings.HasPrefix(s, envelopePrefix) }

// Digest is a short stand-in for a secret in logs and listings: 12 hex
// characters of its HMAC-SHA256, stable for one APP_KEY, telling nothing
// to whoever lacks the key (an unkeyed hash of a guessable key would).
func (c *Cipher) Digest(s string) string {
	m := hmac.New(sha256.New, c.digest)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil)[:digestBytes])
}

// String keeps the keys out of any log line a Cipher is printed in.
func (c *Cipher) String() string { return "crypt.Cipher{keys: redacted}" }

// GoString is String, for %#v.
func (c *Cipher) GoString() string { return c.String() }

func (c *Cipher) open(s string) ([]byte, int, error) {
	nonce, sealed, err := parse(s)
	if err != nil {
		return nil, -1, err
	}
	for i, k := range c.keys {
		// Only the last key opens in place: a failed Open may overwrite its
		// destination, which earlier keys must leave intact for the next.
		var dst []byte
		if i == len(c.keys)-1 {
			dst = sealed[:0]
		}
		if plain, err := k.Open(dst, nonce, sealed, nil); err == nil {
			return plain, i, nil
		}
	}
	return nil, -1, ErrDecrypt
}

// parse checks an envelope as Laravel's Encrypter does (iv, value, mac and
// tag present strings, a 12-byte iv, a 16-byte tag) and returns the nonce
// and the ciphertext with its tag appended, as Open wants, decoded into one
// buffer (a replay opens an envelope on every request).
func parse(s string) (nonce, sealed []byte, err error) {
	js, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, nil, ErrInvalid
	}
	iv, value, tagText, ok := parseOwnEnvelope(js)
	if !ok {
		var env struct{ IV, Value, MAC, Tag *string } // nil: missing, or null
		if err := json.Unmarshal(js, &env); err != nil || env.IV == nil || env.Value == nil || env.MAC == nil || env.Tag == nil {
			return nil, nil, ErrInvalid
		}
		iv, value, tagText = []byte(*env.IV), []byte(*env.Value), []byte(*env.Tag)
	}
	enc := base64.StdEncoding
	buf := make([]byte, enc.DecodedLen(len(iv))+enc.DecodedLen(len(value))+enc.DecodedLen(len(tagText)))
	n1, err1 := enc.Decode(buf, iv)
	rest := buf[n1:]
	n2, err2 := enc.Decode(rest, value)
	n3, err3 := enc.Decode(rest[n2:], tagText)
	if err1 != nil || err2 != nil || err3 != nil || n1 != nonceSize || n3 != tagSize {
		return nil, nil, ErrInvalid
	}
	return buf[:n1:n1], rest[: n2+n3 : n2+n3], nil
}

// parseOwnEnvelope reads the exact form Encrypt writes without
// encoding/json and without copying (base64 holds no quote or backslash).
// ok is false for any other form, such as Laravel's escaped slashes, which
// parse then reads with encoding/json.
func parseOwnEnvelope(js []byte) (iv, value, tag []byte, ok bool) {
	rest, ok := js, true
	take := func(prefix string) []byte {
		if !ok || len(rest) < len(prefix) || string(rest[:len(prefix)]) != prefix {
			ok = false
			return nil
		}
		rest = rest[len(prefix):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
			ok = false
			return nil
		}
		v := rest[:end]
		rest = rest[end+1:]
		return v
	}
	iv, value, mac, tag := take(`{"iv":"`), take(`,"value":"`), take(`,"mac":"`), take(`,"tag":"`)
	if !ok || len(mac) != 0 || string(rest) != "}" {
		return nil, nil, nil, false
	}
	return iv, value, tag, true
}
