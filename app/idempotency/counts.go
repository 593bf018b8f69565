package idempotency

import (
	"context"
	"fmt"
)

// StatusCounts returns how many intents are in each status, every status
// of Statuses present (zero included): the operator console's dashboard.
// It is one GROUP BY over the status column, which the intents' status
// index serves.
func (s *Store) StatusCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	err := s.db.WithContext(ctx).Model(&Record{}).Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count intents by status: %w", err)
	}
	counts := make(map[string]int64, len(Statuses))
	for _, st := range Statuses {
		counts[st] = 0
	}
	for _, r := range rows {
		counts[r.Status] = r.N
	}
	return counts, nil
}
