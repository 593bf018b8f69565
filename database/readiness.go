package database

import (
	"context"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// readinessProbe is the row ProbeWrite writes and deletes again.
type readinessProbe struct {
	ID        string `gorm:"primaryKey"`
	CheckedAt time.Time
}

var _ schema.Tabler = readinessProbe{}

// TableName is the table the probes are written to.
func (readinessProbe) TableName() string { return "readiness_probes" }

// ProbeWrite reports whether the database takes a write: it writes a probe
// row, checked at now, to the readiness_probes table and deletes it again,
// leaving nothing behind. A ping alone would pass on a SQLite file whose
// disk is full.
func ProbeWrite(ctx context.Context, db *gorm.DB, now time.Time) error {
	probe := readinessProbe{ID: ulid.Make().String(), CheckedAt: now.UTC()}
	db = db.WithContext(ctx)
	if err := db.Create(&probe).Error; err != nil {
		return err
	}
	return db.Delete(&readinessProbe{}, "id = ?", probe.ID).Error
}
