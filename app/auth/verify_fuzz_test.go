package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// FuzzVerify checks that Verify never accepts a token it did not sign. The
// service verifies with a current key and a previous one (a rotation); the
// target issues real tokens with both, then tries, per input, the input
// string itself and one mutation of a real token chosen by the input:
// a byte flipped; the header's alg changed (none, HS384, HS512, RS256,
// "hs256", …) with a signature to match where the algorithm has one; the
// segments swapped between tokens or within one; the claims re-encoded
// (changed or not) and signed with another key; the payload replaced;
// the token cut short or added to. Whatever Verify accepts must be one of
// the real tokens (the same header and payload text, a signature that
// decodes to the same bytes) and must speak for that token's consumer; and
// the real tokens still verify after every input. It never panics.
//
// The SQLite database is opened once, in f, and shared by all inputs.
//
// As a test (`go test ./app/auth -run FuzzVerify`) it runs the seeds below
// and those in testdata/fuzz/FuzzVerify. To search for minutes:
//
//	go test ./app/auth -run '^$' -fuzz '^FuzzVerify$' -fuzztime 3m
func FuzzVerify(f *testing.F) {
	ctx := context.Background()
	db := testdb.New(f, "sqlite")
	clk := testkit.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	current := sha256.Sum256([]byte("licensor fuzz: current APP_KEY"))
	previous := sha256.Sum256([]byte("licensor fuzz: previous APP_KEY"))
	keys := [][]byte{current[:], previous[:]}
	const issuer = "https://licensor.test"
	svc := New(Config{DB: db.Gorm, Read: db.Read, Key: current[:], PreviousKeys: [][]byte{previous[:]},
		Issuer: issuer, DefaultTTL: time.Hour, Now: clk.Now})
	old := New(Config{DB: db.Gorm, Read: db.Read, Key: previous[:], Issuer: issuer, DefaultTTL: time.Hour, Now: clk.Now})

	var real []Issued
	for _, in := range []struct {
		s        *Service
		consumer string
	}{{svc, "acme"}, {svc, "globex"}, {old, "acme"}} {
		issued, err := in.s.Issue(ctx, audit.Console(), IssueInput{Consumer: in.consumer, Abilities: []string{LicensesRead}})
		if err != nil {
			f.Fatal(err)
		}
		real = append(real, issued)
	}
	for _, r := range real {
		if _, err := svc.Verify(ctx, r.Secret); err != nil {
			f.Fatalf("a real token does not verify: %v", err)
		}
	}

	// Seeds: (raw, op, which, pos, b, extra).
	f.Add("", uint8(0), uint8(0), uint16(0), byte(0), "")
	f.Add(real[0].Secret, uint8(0), uint8(0), uint16(0), byte(0), "")
	f.Add("Bearer "+real[1].Secret, uint8(0), uint8(1), uint16(0), byte(0), "")
	f.Add(real[0].Secret+".", uint8(0), uint8(0), uint16(0), byte(0), "")
	f.Add("e30.e30.", uint8(0), uint8(0), uint16(0), byte(0), "")
	f.Add("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.e30.", uint8(0), uint8(0), uint16(0), byte(0), "")
	for op := range uint8(opCount) {
		for which := range uint8(len(real)) {
			f.Add("", op, which, uint16(10+37*int(op)), byte(1+op), "x")
		}
	}
	f.Add("", uint8(opFlip), uint8(0), uint16(len(real[0].Secret)-1), byte(0x01), "") // the signature's last character
	f.Add("", uint8(opAlg), uint8(0), uint16(0), byte(0), "")                         // alg none, no signature
	f.Add("", uint8(opResign), uint8(0), uint16(0), byte(0), string(make([]byte, 32)))
	f.Add("", uint8(opResign), uint8(2), uint16(1), byte(1), "another key")
	f.Add("", uint8(opSplice), uint8(0), uint16(0), byte(1), "")
	f.Add("", uint8(opPayload), uint8(1), uint16(0), byte(0), `{"sub":"admin","jti":"x","abilities":["*"]}`)

	f.Fuzz(func(t *testing.T, raw string, op, which uint8, pos uint16, b byte, extra string) {
		base := real[int(which)%len(real)]
		for _, candidate := range []string{raw, mutate(t, real, keys, base.Secret, op, pos, b, extra)} {
			p, err := svc.Verify(ctx, candidate)
			if err != nil {
				continue
			}
			r, ok := sameToken(real, candidate)
			if !ok {
				t.Fatalf("Verify accepted a token it did not sign: %q (op %d) → %+v", candidate, op%opCount, p)
			}
			if p.TokenID != r.ID || p.ConsumerID != r.ConsumerID || p.Consumer != r.Consumer.Name {
				t.Fatalf("Verify(%q) = %+v, not the principal of token %s of %s", candidate, p, r.ID, r.Consumer.Name)
			}
		}
		if _, err := svc.Verify(ctx, base.Secret); err != nil {
			t.Fatalf("a real token no longer verifies: %v", err)
		}
	})
}

// The mutations of a real token.
const (
	opFlip    = iota // XOR one byte with b
	opAlg            // set the header's alg, and sign to match
	opSwap           // swap segments, within the token or with another
	opResign         // re-encode the claims, maybe changed, under another key
	opPayload        // replace the payload by extra, keep the signature
	opCut            // cut the token at pos
	opInsert         // insert extra at pos
	opSplice         // header and payload of one token, signature of another
	opCount
)

var algs = []string{"none", "None", "NONE", "", "HS384", "HS512", "RS256", "ES256", "PS256", "EdDSA", "hs256", "HS256 ", " HS256", "HS256\x00", "HS2560"}

// mutate returns the token secret changed by op.
func mutate(t *testing.T, real []Issued, keys [][]byte, secret string, op uint8, pos uint16, b byte, extra string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	parts := strings.Split(secret, ".")
	if len(parts) != 3 {
		t.Fatalf("a real token has %d segments", len(parts))
	}
	at := func(n int) int { return int(pos) % (n + 1) }
	switch op % opCount {
	case opFlip:
		s := []byte(secret)
		s[int(pos)%len(s)] ^= max(b, 1)
		return string(s)
	case opAlg:
		alg := algs[int(b)%len(algs)]
		var header map[string]any
		h, _ := enc.DecodeString(parts[0])
		if err := json.Unmarshal(h, &header); err != nil {
			t.Fatalf("a real token's header: %v", err)
		}
		header["alg"] = alg
		if pos&1 == 1 {
			delete(header, "typ")
		}
		hj, _ := json.Marshal(header)
		input := enc.EncodeToString(hj) + "." + parts[1]
		sig := ""
		if m, ok := jwt.GetSigningMethod(alg).(*jwt.SigningMethodHMAC); ok {
			mac, err := m.Sign(input, keys[int(pos>>1)%len(keys)])
			if err != nil {
				t.Fatal(err)
			}
			sig = enc.EncodeToString(mac)
		} else if alg != "none" && pos&2 == 2 {
			sig = parts[2] // the HS256 signature, under another algorithm
		}
		return input + "." + sig
	case opSwap:
		other := strings.Split(real[int(b)%len(real)].Secret, ".")
		switch pos % 6 {
		case 0:
			return parts[1] + "." + parts[0] + "." + parts[2]
		case 1:
			return parts[0] + "." + other[1] + "." + parts[2]
		case 2:
			return other[0] + "." + parts[1] + "." + other[2]
		case 3:
			return parts[0] + "." + parts[2] + "." + parts[1]
		case 4:
			return parts[0] + "." + parts[1] + "." + other[2]
		default:
			return parts[0] + "." + parts[0] + "." + parts[2]
		}
	case opResign:
		key := []byte(extra)
		for _, k := range keys {
			if hmacEquivalent(key, k) {
				return secret // the same key: a genuine signature, not a forgery
			}
		}
		var c map[string]any
		p, _ := enc.DecodeString(parts[1])
		if err := json.Unmarshal(p, &c); err != nil {
			t.Fatalf("a real token's claims: %v", err)
		}
		switch pos % 5 {
		case 1:
			c["sub"] = real[int(b)%len(real)].ConsumerID
		case 2:
			c["abilities"] = []string{All}
		case 3:
			c["exp"] = c["exp"].(float64) + 3600
		case 4:
			c["jti"] = real[int(b)%len(real)].ID
		}
		cj, _ := json.Marshal(c)
		input := parts[0] + "." + enc.EncodeToString(cj)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(input))
		return input + "." + enc.EncodeToString(mac.Sum(nil))
	case opPayload:
		payload := enc.EncodeToString([]byte(extra))
		if b&1 == 1 {
			payload = extra
		}
		return parts[0] + "." + payload + "." + parts[2]
	case opCut:
		return secret[:at(len(secret))]
	case opInsert:
		i := at(len(secret))
		return secret[:i] + extra + secret[i:]
	default: // opSplice
		other := real[int(b)%len(real)].Secret
		i := strings.LastIndexByte(other, '.')
		return parts[0] + "." + parts[1] + other[i:]
	}
}

// hmacEquivalent reports whether HMAC-SHA256 under a and under b is the
// same function (a key shorter than the block is padded with zeros, so
// "k" and "k\x00" are one key): the same MAC of a probe message.
func hmacEquivalent(a, b []byte) bool {
	ma, mb := hmac.New(sha256.New, a), hmac.New(sha256.New, b)
	ma.Write([]byte("probe"))
	mb.Write([]byte("probe"))
	return hmac.Equal(ma.Sum(nil), mb.Sum(nil))
}

// sameToken returns the real token candidate is: the same header and
// payload text (which the signature covers) and a signature that decodes,
// as the JWT library decodes it (base64url without padding, which ignores
// CR and LF and the unused low bits of the last character), to the same
// bytes.
func sameToken(real []Issued, candidate string) (Issued, bool) {
	ci := strings.LastIndexByte(candidate, '.')
	if ci < 0 {
		return Issued{}, false
	}
	csig, err := base64.RawURLEncoding.DecodeString(candidate[ci+1:])
	if err != nil {
		return Issued{}, false
	}
	for _, r := range real {
		ri := strings.LastIndexByte(r.Secret, '.')
		rsig, _ := base64.RawURLEncoding.DecodeString(r.Secret[ri+1:])
		if candidate[:ci] == r.Secret[:ri] && bytes.Equal(csig, rsig) {
			return r, true
		}
	}
	return Issued{}, false
}
