package webhooks

import (
	"context"
	"fmt"
	"time"
)

// Stats are what the webhook gauges report, read at each scrape: when the
// oldest pending delivery of an enabled endpoint began its retry window
// (zero when none), and how many endpoints are disabled.
func (s *Service) Stats(ctx context.Context) (oldestPending time.Time, disabled int64, err error) {
	db := s.read.WithContext(ctx)
	var oldest []time.Time
	err = db.Model(&Delivery{}).
		Where("status = ? AND endpoint_id IN (?)", StatusPending, db.Model(&Endpoint{}).Select("id").Where("enabled = ?", true)).
		Order("window_start").Limit(1).Pluck("window_start", &oldest).Error
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("read the oldest pending webhook delivery: %w", err)
	}
	if len(oldest) == 1 {
		oldestPending = oldest[0]
	}
	if err := db.Model(&Endpoint{}).Where("enabled = ?", false).Count(&disabled).Error; err != nil {
		return time.Time{}, 0, fmt.Errorf("count disabled webhook endpoints: %w", err)
	}
	return oldestPending, disabled, nil
}
