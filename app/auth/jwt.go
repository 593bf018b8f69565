package auth

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// claims are a token's JWT claims: sub is the consumer id, jti the token id.
type claims struct {
	Abilities Abilities `json:"abilities"`
	jwt.RegisteredClaims
}

// signer signs and parses tokens with HS256 and APP_KEY, and nothing else.
// During a key rotation it still verifies tokens signed with a previous key
// (APP_PREVIOUS_KEYS), so clients are not logged out by the rotation; new
// tokens are signed with the current key only.
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
		jwt.WithLeeway(5*time.Second),
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
// this server's APP_URL: Verify logs why at Debug, the client sees a bare
// 401.
type issuerError struct {
	got string // the token's iss
	err error
}

func (e *issuerError) Error() string { return e.err.Error() }
func (e *issuerError) Unwrap() error { return e.err }
