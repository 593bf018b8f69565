package events

import "time"

// TimeLayout is how Laravel serialises a date, and so every time in a body
// of the API's or an event's: UTC, microseconds (always six digits), and Z:
// 2026-11-30T10:00:00.000000Z.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// License is a license as the API shows it and an event's data carries it:
// one shape, so a consumer reads a webhook's license as it reads a GET's.
type License struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Domain       string `json:"domain"`
	LicenseKey   string `json:"license_key"`
	Status       string `json:"status"`
	VendorSiteID string `json:"vendor_site_id"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

// LicenseData is the data of a license event: {"license": …}.
type LicenseData struct {
	License License `json:"license"`
}

// Time renders t as every body does (TimeLayout), in UTC.
func Time(t time.Time) string { return t.UTC().Format(TimeLayout) }
