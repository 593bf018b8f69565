package licenses

import (
	"time"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/internal/fault"
)

// Statuses of a license.
const (
	StatusActive   = "active"
	StatusRevoking = "revoking" // the vendor is being asked to delete the site
	StatusRevoked  = "revoked"
)

// License is a license for one domain, held by one consumer.
type License struct {
	ID            string `gorm:"primaryKey"`
	ConsumerID    string
	Name          string
	Domain        string
	ActiveDomain  *string // Domain until revoked, then NULL: its unique index allows one active license per domain
	LicenseKey    string
	Status        string
	VendorSiteID  string
	RevokedAt     *time.Time
	VendorEventAt *time.Time // the last vendor event applied: an older one changes nothing
	// IntentID is the public id of the intent that created the license: a
	// retry or a resumption of that intent answers as its creation did.
	IntentID      *string
	EventSequence uint64 // the sequence of its last consumer event (0: none yet)
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// KeyUnavailable says no configured key opens the stored license key
	// (LicenseKey is then empty): the operator's reads show such a license
	// rather than fail. Not stored.
	KeyUnavailable bool `gorm:"-"`
}

// Resource is the license as the API shows it and its events carry it.
func (l License) Resource() events.License {
	return events.License{
		ID:           l.ID,
		Name:         l.Name,
		Domain:       l.Domain,
		LicenseKey:   l.LicenseKey,
		Status:       l.Status,
		VendorSiteID: l.VendorSiteID,
		CreatedAt:    events.Time(l.CreatedAt),
		UpdatedAt:    events.Time(l.UpdatedAt),
	}
}

// Errors of the licenses domain; each code is also the class an intent's
// attempt history records.
var (
	// ErrDomainTaken means another consumer holds an active license for the
	// domain, and says nothing about who.
	ErrDomainTaken error = fault.New("domain_taken", "the domain is licensed to another consumer")
	ErrNotFound    error = fault.New("license_not_found", "license not found")
)

// Input is what a consumer asks for.
type Input struct {
	Name   string
	Domain string
}
