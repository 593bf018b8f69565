package auth

import (
	"encoding/json"
	"time"
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
	LastUsedAt *time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// TableName is Laravel Sanctum's table name.
func (Token) TableName() string { return "personal_access_tokens" }

// Live reports whether the token may still be used at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt == nil && now.Before(t.ExpiresAt)
}

// Abilities is a token's list of abilities.
type Abilities []string

// MarshalJSON renders nil as [] rather than null.
func (a Abilities) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]string(a))
}
