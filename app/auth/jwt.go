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
type signer struct {
	key    []byte
	issuer string
	now    func() time.Time
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
			return s.key, nil
		},
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(s.issuer),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(s.now),
		jwt.WithLeeway(5*time.Second),
	)
	if err != nil {
		return nil, err
	}
	if c.ID == "" || c.Subject == "" {
		return nil, errors.New("token lacks jti or sub")
	}
	return &c, nil
}
