package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm/schema"
)

// Consumer is a caller of the API: a shop or SaaS back end, named by an admin.
type Consumer struct {
	ID        string `gorm:"primaryKey"`
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Token is a row of personal_access_tokens: the record of an issued token.
// The token string itself is stored nowhere; its jti is the row's ID.
type Token struct {
	ID         string `gorm:"primaryKey"`
	ConsumerID string
	Consumer   Consumer `gorm:"foreignKey:ConsumerID"`
	Name       string
	Abilities  Abilities `gorm:"serializer:json"`
	IssuedBy   *string   // the token that issued it; nil for the command line (or before issuers were kept)
	LastUsedAt *time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

var _ schema.Tabler = Token{}

// TableName is Laravel Sanctum's table name.
func (Token) TableName() string { return "personal_access_tokens" }

// Live reports whether the token may still be used at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt == nil && now.Before(t.ExpiresAt)
}

// Abilities is a token's list of abilities.
type Abilities []string

var _ json.Marshaler = Abilities{}

// MarshalJSON renders nil as [] rather than null.
func (a Abilities) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]string(a))
}

// parseAbilities reads the abilities column without encoding/json for the
// plain form every row holds (no escapes, no spaces), with it otherwise.
func parseAbilities(b []byte) (Abilities, error) {
	if len(b) >= 2 && b[0] == '[' && b[len(b)-1] == ']' && !bytes.ContainsAny(b, "\\ \t\r\n") {
		inner := b[1 : len(b)-1]
		if len(inner) == 0 {
			return Abilities{}, nil
		}
		out := make(Abilities, 0, bytes.Count(inner, []byte(","))+1)
		plain := true
		for part := range bytes.SplitSeq(inner, []byte(",")) {
			if len(part) < 2 || part[0] != '"' || part[len(part)-1] != '"' || bytes.IndexByte(part[1:len(part)-1], '"') >= 0 {
				plain = false
				break
			}
			out = append(out, string(part[1:len(part)-1]))
		}
		if plain {
			return out, nil
		}
	}
	var a Abilities
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("abilities column: %w", err)
	}
	return a, nil
}
