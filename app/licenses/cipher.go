package licenses

import "fmt"

// Cipher keeps license keys encrypted at rest (app/crypt's *Cipher); a key
// written in plaintext before encryption at rest is read as it is until
// `licensor keys rotate` seals it.
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
		return fmt.Errorf("decrypt the key of license %s: %w", lic.ID, err)
	}
	lic.LicenseKey = string(key)
	return nil
}
