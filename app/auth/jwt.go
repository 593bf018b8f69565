package auth

import (
	"errors"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// claims are a token's JWT claims: sub is the consumer id, jti the token id.
type claims struct {
	Abilities Abilities `json:"abilities"`
	jwt.RegisteredClaims
}

// signer signs tokens with HS256 and APP_KEY, and nothing else; it still
// verifies those of a previous key (APP_PREVIOUS_KEYS), so a key rotation
// logs no client out.
type signer struct {
	key      []byte
	previous [][]byte
	issuer   string
	now      func() time.Time
}

func (s signer) sign(t Token) (string, error) {
	c := claims{
		Abilities: t.Abilities,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.issuer,
			Subject:   t.ConsumerID,
			ID:        t.ID,
			IssuedAt:  jwt.NewNumericDate(t.CreatedAt),
			ExpiresAt: jwt.NewNumericDate(t.ExpiresAt),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
}

// parse verifies the signature and the registered claims. The key function
// hands out the HMAC key only for HS256, and WithValidMethods refuses every
// other algorithm (none, HS512, RS256 with the key as a "public key", …).
func (s signer) parse(raw string) (*claims, error) {
	var c claims
	_, err := jwt.ParseWithClaims(raw, &c,
		func(t *jwt.Token) (any, error) {
			if t.Method != jwt.SigningMethodHS256 {
				return nil, errors.New("unexpected signing method")
			}
			if len(s.previous) == 0 {
				return s.key, nil
			}
			keys := jwt.VerificationKeySet{Keys: []jwt.VerificationKey{s.key}}
			for _, k := range s.previous {
				keys.Keys = append(keys.Keys, k)
			}
			return keys, nil
		},
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(s.issuer),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(s.now),
		jwt.WithLeeway(tokenLeeway),
		// One spelling per token: base64url with no stray trailing bits or
		// padding, so a token string cannot be varied and still verify.
		jwt.WithStrictDecoding(),
	)
	if errors.Is(err, jwt.ErrTokenInvalidIssuer) {
		// The signature is good (it is checked before the claims): a token
		// of this key issued under another APP_URL.
		return nil, &issuerError{got: c.Issuer, err: err}
	}
	if err != nil {
		return nil, err
	}
	if c.ID == "" || c.Subject == "" {
		return nil, errors.New("token lacks jti or sub")
	}
	return &c, nil
}

// issuerError is parse's refusal of a well-signed token whose iss is not
// this server's APP_URL (Verify logs it at Debug).
type issuerError struct {
	got string // the token's iss
	err error
}

func (e *issuerError) Error() string { return e.err.Error() }
func (e *issuerError) Unwrap() error { return e.err }

// verifiedCache remembers the claims parse checked, so a token seen again
// costs a map lookup instead of an HMAC and a JSON decode. Only the
// signature check is cached: the time claims are checked on every use, and
// Verify still reads the row, so a revoked token stops at once. When full
// it starts over.
type verifiedCache struct {
	mu      sync.RWMutex
	byToken map[string]verifiedClaims
}

type verifiedClaims struct {
	id, subject string
	issuedAt    time.Time
	expiresAt   time.Time
}

const (
	verifiedCacheSize = 10_000          // a few hundred bytes a token
	tokenLeeway       = 5 * time.Second // the clock skew parse allows on exp and iat
)

func (c *verifiedCache) get(raw string, now time.Time) (verifiedClaims, bool) {
	c.mu.RLock()
	v, ok := c.byToken[raw]
	c.mu.RUnlock()
	if !ok {
		return verifiedClaims{}, false
	}
	if !now.Before(v.expiresAt.Add(tokenLeeway)) || now.Add(tokenLeeway).Before(v.issuedAt) {
		return verifiedClaims{}, false // parse decides, and says why
	}
	return v, true
}

func (c *verifiedCache) put(raw string, cl *claims) {
	if cl.ExpiresAt == nil || cl.IssuedAt == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byToken) >= verifiedCacheSize {
		clear(c.byToken)
	}
	c.byToken[raw] = verifiedClaims{id: cl.ID, subject: cl.Subject, issuedAt: cl.IssuedAt.Time, expiresAt: cl.ExpiresAt.Time}
}

// claimedIDMax bounds what ClaimedID returns: a token id is a ULID (26
// characters), and a longer claim is cut rather than kept whole.
const claimedIDMax = 32

// ClaimedID is the token id (jti) a token string claims, unverified, or ""
// when it is no JWT or claims none. It proves nothing: it is what to count
// one token's failed attempts by, whatever their address. It is no secret:
// the console lists token ids and every access log line writes one.
func ClaimedID(raw string) string {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(raw, &c); err != nil {
		return ""
	}
	if len(c.ID) > claimedIDMax {
		return c.ID[:claimedIDMax]
	}
	return c.ID
}
