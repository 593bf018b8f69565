package crypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var (
	keyA = bytes.Repeat([]byte{0xA1}, KeySize)
	keyB = bytes.Repeat([]byte{0xB2}, KeySize)
	keyC = bytes.Repeat([]byte{0xC3}, KeySize)
)

func mustNew(t *testing.T, current []byte, previous ...[]byte) *Cipher {
	t.Helper()
	c, err := New(current, previous...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	c := mustNew(t, keyA)
	for _, plain := range [][]byte{[]byte("LK-1-acme-test"), {}, []byte(`{"data":{"license_key":"x/y+z="}}`), {0, 0xff, 0x80}} {
		env, err := c.Encrypt(plain)
		if err != nil {
			t.Fatal(err)
		}
		if !Encrypted(env) || !c.Encrypted(env) {
			t.Errorf("Encrypted(%q) = false for an envelope", env)
		}
		got, err := c.Decrypt(env)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Decrypt(Encrypt(%q)) = %q, %v", plain, got, err)
		}
	}
}

func TestTwoEncryptionsOfOneValueDiffer(t *testing.T) {
	c := mustNew(t, keyA)
	a, _ := c.Encrypt([]byte("same"))
	b, _ := c.Encrypt([]byte("same"))
	if a == b {
		t.Error("two encryptions of one value are equal: the nonce is not fresh")
	}
	if decode(t, a).IV == decode(t, b).IV {
		t.Error("two encryptions share a nonce")
	}
}

// The envelope is Laravel's for AES-256-GCM: base64 of a JSON object with
// iv, value, mac and tag in that order, mac empty, a 12-byte iv, a 16-byte
// tag, a ciphertext as long as the plaintext, compact and slashes unescaped.
func TestEnvelopeShapeIsLaravels(t *testing.T) {
	c := mustNew(t, keyA)
	plain := []byte("LK-1-acme-test")
	env, _ := c.Encrypt(plain)
	js, err := base64.StdEncoding.DecodeString(env)
	if err != nil {
		t.Fatalf("the envelope is not standard base64: %v", err)
	}
	var e envelope
	if err := json.Unmarshal(js, &e); err != nil {
		t.Fatal(err)
	}
	// The fields, their order and the bytes between them, as json_encode writes them.
	want := fmt.Sprintf(`{"iv":"%s","value":"%s","mac":"","tag":"%s"}`, e.IV, e.Value, e.Tag)
	if string(js) != want {
		t.Errorf("JSON = %s\nwant %s", js, want)
	}
	iv, _ := base64.StdEncoding.DecodeString(e.IV)
	tag, _ := base64.StdEncoding.DecodeString(e.Tag)
	ct, _ := base64.StdEncoding.DecodeString(e.Value)
	if len(iv) != 12 || len(tag) != 16 || len(ct) != len(plain) || e.MAC != "" {
		t.Errorf("iv %d bytes, tag %d, value %d, mac %q; want 12, 16, %d, empty", len(iv), len(tag), len(ct), e.MAC, len(plain))
	}
}

// An envelope written the way PHP writes it (strings glued together, not
// this package's encoder), under the same derived key, opens: the format is
// the one Laravel reads and writes, not merely one this package agrees with.
func TestHandMadeLaravelEnvelopeOpens(t *testing.T) {
	derived, err := hkdf.Key(sha256.New, keyA, nil, "licensor encryption v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(derived)
	gcm, _ := cipher.NewGCM(block)
	nonce := []byte("twelve-bytes")
	sealed := gcm.Seal(nil, nonce, []byte("from php"), nil)
	b64 := base64.StdEncoding.EncodeToString
	js := `{"iv":"` + b64(nonce) + `","value":"` + b64(sealed[:len(sealed)-16]) + `","mac":"","tag":"` + b64(sealed[len(sealed)-16:]) + `"}`
	got, err := mustNew(t, keyA).Decrypt(b64([]byte(js)))
	if err != nil || string(got) != "from php" {
		t.Errorf("Decrypt = %q, %v", got, err)
	}
}

func TestTamperedEnvelopeRefused(t *testing.T) {
	c := mustNew(t, keyA)
	env, _ := c.Encrypt([]byte("LK-1-acme-test"))
	e := decode(t, env)
	flip := func(s string) string {
		b, _ := base64.StdEncoding.DecodeString(s)
		b[0] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := map[string]string{
		"value":         encode(t, envelope{e.IV, flip(e.Value), e.MAC, e.Tag}),
		"tag":           encode(t, envelope{e.IV, e.Value, e.MAC, flip(e.Tag)}),
		"iv":            encode(t, envelope{flip(e.IV), e.Value, e.MAC, e.Tag}),
		"no tag":        encode(t, envelope{e.IV, e.Value, e.MAC, ""}),
		"short iv":      encode(t, envelope{base64.StdEncoding.EncodeToString([]byte("short")), e.Value, e.MAC, e.Tag}),
		"truncated":     env[:len(env)-8],
		"not base64":    envelopePrefix + "!!!",
		"mac missing":   base64.StdEncoding.EncodeToString([]byte(`{"iv":"` + e.IV + `","value":"` + e.Value + `","tag":"` + e.Tag + `"}`)),
		"value is null": base64.StdEncoding.EncodeToString([]byte(`{"iv":"` + e.IV + `","value":null,"mac":"","tag":"` + e.Tag + `"}`)),
	}
	for name, bad := range cases {
		got, err := c.Decrypt(bad)
		if err == nil {
			t.Errorf("%s: Decrypt accepted a tampered envelope: %q", name, got)
			continue
		}
		if !errors.Is(err, ErrDecrypt) && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v is neither ErrDecrypt nor ErrInvalid", name, err)
		}
		if _, _, err := c.Reseal(bad); err == nil && Encrypted(bad) {
			t.Errorf("%s: Reseal accepted a tampered envelope", name)
		}
	}
}

func TestPreviousKeyDecrypts(t *testing.T) {
	old, _ := mustNew(t, keyA).Encrypt([]byte("sealed under A"))
	older, _ := mustNew(t, keyC).Encrypt([]byte("sealed under C"))
	rotated := mustNew(t, keyB, keyA, keyC)
	for env, want := range map[string]string{old: "sealed under A", older: "sealed under C"} {
		if got, err := rotated.Decrypt(env); err != nil || string(got) != want {
			t.Errorf("Decrypt = %q, %v; want %q", got, err, want)
		}
	}
	fresh, _ := rotated.Encrypt([]byte("x"))
	if _, err := mustNew(t, keyB).Decrypt(fresh); err != nil {
		t.Errorf("a new value is not sealed under the current key: %v", err)
	}
	if _, err := mustNew(t, keyA).Decrypt(fresh); err == nil {
		t.Error("a new value opens under a previous key")
	}
}

func TestWrongKeyRefused(t *testing.T) {
	env, _ := mustNew(t, keyA).Encrypt([]byte("LK-secret-value"))
	got, err := mustNew(t, keyB, keyC).Decrypt(env)
	if !errors.Is(err, ErrDecrypt) {
		t.Fatalf("Decrypt under the wrong keys = %q, %v; want ErrDecrypt", got, err)
	}
	if strings.Contains(err.Error(), "LK-secret-value") || strings.Contains(err.Error(), env) {
		t.Errorf("the error leaks the value: %v", err)
	}
}

func TestReseal(t *testing.T) {
	underA, _ := mustNew(t, keyA).Encrypt([]byte("a"))
	c := mustNew(t, keyB, keyA)
	underB, _ := c.Encrypt([]byte("b"))

	if out, changed, err := c.Reseal(underB); err != nil || changed || out != underB {
		t.Errorf("Reseal of a current envelope = changed %v, %v; want it as it is", changed, err)
	}
	out, changed, err := c.Reseal(underA)
	if err != nil || !changed {
		t.Fatalf("Reseal of a previous envelope = changed %v, %v", changed, err)
	}
	if got, err := mustNew(t, keyB).Decrypt(out); err != nil || string(got) != "a" {
		t.Errorf("resealed value under B alone = %q, %v", got, err)
	}
	out, changed, err = c.Reseal("LK-legacy-plaintext")
	if err != nil || !changed || !Encrypted(out) {
		t.Fatalf("Reseal of plaintext = %q, changed %v, %v", out, changed, err)
	}
	if got, _ := mustNew(t, keyB).Decrypt(out); string(got) != "LK-legacy-plaintext" {
		t.Errorf("resealed plaintext opens to %q", got)
	}
	underC, _ := mustNew(t, keyC).Encrypt([]byte("c"))
	if _, changed, err := c.Reseal(underC); !errors.Is(err, ErrDecrypt) || changed {
		t.Errorf("Reseal of an envelope no key opens = changed %v, %v; want ErrDecrypt", changed, err)
	}
}

func TestEncryptedTellsEnvelopesFromPlaintext(t *testing.T) {
	for _, plain := range []string{"", "LK-1-acme-test", `{"data":{}}`, "eyJ", "base64:AAAA"} {
		if Encrypted(plain) {
			t.Errorf("Encrypted(%q) = true", plain)
		}
	}
}

func TestDigest(t *testing.T) {
	a, a2, b := mustNew(t, keyA), mustNew(t, keyA, keyC), mustNew(t, keyB, keyA)
	d := a.Digest("very-secret-idempotency-key")
	if len(d) != 12 || strings.Trim(d, "0123456789abcdef") != "" {
		t.Errorf("Digest = %q, want 12 hex characters", d)
	}
	sum := sha256.Sum256([]byte("very-secret-idempotency-key"))
	if d == hex.EncodeToString(sum[:6]) {
		t.Error("Digest is the unkeyed SHA-256 prefix")
	}
	if a2.Digest("very-secret-idempotency-key") != d {
		t.Error("Digest differs for one APP_KEY")
	}
	if b.Digest("very-secret-idempotency-key") == d {
		t.Error("Digest is the same under another APP_KEY")
	}
	if a.Digest("other") == d {
		t.Error("two keys share a digest")
	}
}

func TestNewRefusesBadKeysWithoutShowingThem(t *testing.T) {
	secret := []byte("short-secret-key")
	for _, tc := range []struct {
		current  []byte
		previous [][]byte
		names    string
	}{
		{secret, nil, "current key"},
		{nil, nil, "current key"},
		{keyA, [][]byte{keyB, secret}, "previous key 2"},
	} {
		_, err := New(tc.current, tc.previous...)
		if err == nil || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("New = %v, want an error naming the %s", err, tc.names)
			continue
		}
		if strings.Contains(err.Error(), string(secret)) || strings.Contains(err.Error(), hex.EncodeToString(secret)) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}

func TestPrintingACipherShowsNoKey(t *testing.T) {
	c := mustNew(t, keyA)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if !strings.Contains(s, "redacted") || strings.Contains(s, fmt.Sprint(c.digest)) {
			t.Errorf("printed as %q", s)
		}
	}
}

func decode(t *testing.T, env string) envelope {
	t.Helper()
	js, err := base64.StdEncoding.DecodeString(env)
	if err != nil {
		t.Fatal(err)
	}
	var e envelope
	if err := json.Unmarshal(js, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func encode(t *testing.T, e envelope) string {
	t.Helper()
	js, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(js)
}

// BenchmarkDecrypt is what a replay pays to open a stored 201 body.
func BenchmarkDecrypt(b *testing.B) {
	c, _ := New(keyA)
	env, _ := c.Encrypt([]byte(`{"data":{"id":"01J0000000000000000000000","name":"Acme","domain":"acme.test","license_key":"LK-1-acme-test","status":"active"}}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decrypt(env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncrypt(b *testing.B) {
	c, _ := New(keyA)
	body := []byte(`{"data":{"id":"01J0000000000000000000000","name":"Acme","domain":"acme.test","license_key":"LK-1-acme-test","status":"active"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encrypt(body); err != nil {
			b.Fatal(err)
		}
	}
}

// The envelope Encrypt writes is read without encoding/json, and anything
// else is read with it: both give the same fields, and a mangled envelope
// is refused either way.
func TestOwnEnvelopeFastPath(t *testing.T) {
	c, err := New(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := c.Encrypt([]byte("the license key"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := base64.StdEncoding.DecodeString(sealed)
	iv, value, tag, ok := parseOwnEnvelope(js)
	var env struct{ IV, Value, Tag string }
	if err := json.Unmarshal(js, &env); err != nil {
		t.Fatal(err)
	}
	if !ok || string(iv) != env.IV || string(value) != env.Value || string(tag) != env.Tag {
		t.Fatalf("parseOwnEnvelope(%s) = %q %q %q %v", js, iv, value, tag, ok)
	}
	for _, other := range []string{
		`{"value":"a","iv":"b","mac":"","tag":"c"}`,    // another order
		`{"iv":"a\/b","value":"a","mac":"","tag":"c"}`, // an escape
		`{"iv":"a","value":"a","mac":"x","tag":"c"}`,   // a mac
		`{"iv":"a","value":"a","mac":"","tag":"c"} `,   // trailing bytes
		`{"iv":"a","value":"a","mac":"","tag":"c"`,     // no end
		`{"iv":"a","value":"a","mac":""}`,              // no tag
		`{"iv":"a","value":"a`,                         // cut short
		``,
	} {
		if _, _, _, ok := parseOwnEnvelope([]byte(other)); ok {
			t.Errorf("parseOwnEnvelope took %s", other)
		}
	}
	// Laravel's own spelling (escaped slashes in base64) still opens, through encoding/json.
	laravel := strings.ReplaceAll(string(js), "/", `\/`)
	if plain, err := c.Decrypt(base64.StdEncoding.EncodeToString([]byte(laravel))); err != nil || string(plain) != "the license key" {
		t.Errorf("the escaped form: %q, %v", plain, err)
	}
}
