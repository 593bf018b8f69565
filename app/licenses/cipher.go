package licenses

import "fmt"

// Cipher keeps license keys encrypted at rest (app/crypt's *Cipher, built
// from APP_KEY by the bootstrap): every write seals the key, every read
// opens it, and a key written in plaintext before encryption at rest is
// read as it is until `licensor keys rotate` seals it.
type Cipher interface {
	Encrypt(plain []byte) (string, error)
	Decrypt(envelope string) ([]byte, error)
	// Encrypted tells an envelope from a plaintext value.
	Encrypted(s string) bool
}

// sealed is lic as its row is stored: its license key encrypted.
func (s *Service) sealed(lic License) (License, error) {
	key, err := s.cfg.Cipher.Encrypt([]byte(lic.LicenseKey))
	if err != nil {
		return License{}, fmt.Errorf("encrypt license key: %w", err)
	}
	lic.LicenseKey = key
	return lic, nil
}

// open decrypts the license key of a row read from the table, in place.
func (s *Service) open(lic *License) error {
	if !s.cfg.Cipher.Encrypted(lic.LicenseKey) {
		return nil // written before encryption at rest
	}
	key, err := s.cfg.Cipher.Decrypt(lic.LicenseKey)
	if err != nil {
		return &keyError{id: lic.ID, err: err}
	}
	lic.LicenseKey = string(key)
	return nil
}

// keyError is a license key no configured key opens (app/crypt's
// ErrDecrypt, which it wraps: 503 key_unavailable to a request).
type keyError struct {
	id  string
	err error
}

func (e *keyError) Error() string {
	return fmt.Sprintf("decrypt the key of license %s: %v", e.id, e.err)
}

// Unwrap exposes the cipher's error.
func (e *keyError) Unwrap() error { return e.err }

// ErrorClass is key_unavailable (an intent's attempt history).
func (e *keyError) ErrorClass() string { return "key_unavailable" }
