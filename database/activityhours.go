package database

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// The activity_hours table holds one row per UTC hour (its start) and
// metric, with the hour's count: app/activity's chart data. Each statement
// has one text per dialect, so that a flush of several rows in one
// transaction runs the same prepared statement for each.
const (
	mysqlActivityAdd = "INSERT INTO activity_hours (`hour`, metric, `count`) VALUES (?, ?, ?) " +
		"ON DUPLICATE KEY UPDATE `count` = `count` + VALUES(`count`)"
	sqliteActivityAdd = "INSERT INTO activity_hours (hour, metric, count) VALUES (?, ?, ?) " +
		"ON CONFLICT (hour, metric) DO UPDATE SET count = count + excluded.count"
	mysqlActivitySet = "INSERT INTO activity_hours (`hour`, metric, `count`) VALUES (?, ?, ?) " +
		"ON DUPLICATE KEY UPDATE `count` = VALUES(`count`)"
	sqliteActivitySet = "INSERT INTO activity_hours (hour, metric, count) VALUES (?, ?, ?) " +
		"ON CONFLICT (hour, metric) DO UPDATE SET count = excluded.count"
)

// AddActivityHour adds n to metric's count in the UTC hour starting at hour,
// in one upsert that every replica's flushes add to. Outside a transaction
// it is safe to run again after a lock conflict (RetryOnConflict).
func AddActivityHour(ctx context.Context, db *gorm.DB, hour time.Time, metric string, n int64) *gorm.DB {
	return db.WithContext(ctx).Exec(forDialect(db, sqliteActivityAdd, mysqlActivityAdd), hour.UTC(), metric, n)
}

// SetActivityHour sets metric's count in that hour to n (a gauge: the last
// value written is the hour's). One upsert, safe to run again.
func SetActivityHour(ctx context.Context, db *gorm.DB, hour time.Time, metric string, n int64) *gorm.DB {
	return db.WithContext(ctx).Exec(forDialect(db, sqliteActivitySet, mysqlActivitySet), hour.UTC(), metric, n)
}
