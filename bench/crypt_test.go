package main

import (
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/config"
)

// A license key as the fake vendor makes them ("LK-" and rand.Text()).
const licenseKey = "LK-ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// A stored create response of about licensor's size, which every replay
// decrypts.
var responseBody = []byte(`{"data":{"id":"01JDQ8Z7F0A2B4C6D8E0G2H4J6","name":"Bench","domain":"c1-abcdef01.bench.test","license_key":"` +
	licenseKey + `","status":"active","vendor_site_id":"site_1","created_at":"2026-11-30T10:00:00.000000Z","updated_at":"2026-11-30T10:00:00.000000Z"}}`)

func newCipher(b *testing.B) *crypt.Cipher {
	c, err := crypt.New(config.NewKey())
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchEncrypt(b *testing.B, plain []byte) {
	c := newCipher(b)
	for b.Loop() {
		if _, err := c.Encrypt(plain); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecrypt(b *testing.B, plain []byte) {
	c := newCipher(b)
	sealed, err := c.Encrypt(plain)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Decrypt(sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCipherEncryptLicenseKey seals a license key, as a create does.
func BenchmarkCipherEncryptLicenseKey(b *testing.B) { benchEncrypt(b, []byte(licenseKey)) }

// BenchmarkCipherDecryptLicenseKey opens a license key, as a show does.
func BenchmarkCipherDecryptLicenseKey(b *testing.B) { benchDecrypt(b, []byte(licenseKey)) }

// BenchmarkCipherDecryptResponse opens a stored response, as a replay does.
func BenchmarkCipherDecryptResponse(b *testing.B) { benchDecrypt(b, responseBody) }

// TestResponseBodySize keeps the stored response near a real one's size.
func TestResponseBodySize(t *testing.T) {
	if n := len(responseBody); n < 200 || !strings.Contains(string(responseBody), licenseKey) {
		t.Fatalf("responseBody: %d bytes", n)
	}
}
