package webhooks

import (
	"context"
	"fmt"
)

// Backlog is what the operator console's dashboard shows of the
// deliveries: how many are owed (pending), how many of those have failed at
// least one attempt (failing), and how many failed for good.
type Backlog struct {
	Pending, Failing, Failed int64
}

// Backlog counts the deliveries owed and failed, every endpoint's.
func (s *Service) Backlog(ctx context.Context) (Backlog, error) {
	var rows []struct {
		Status  string
		Retried bool
		N       int64
	}
	err := s.read.WithContext(ctx).Model(&Delivery{}).
		Select("status, attempts > 0 AS retried, COUNT(*) AS n").Where("status IN ?", []string{StatusPending, StatusFailed}).
		Group("status, attempts > 0").Scan(&rows).Error
	if err != nil {
		return Backlog{}, fmt.Errorf("count webhook deliveries: %w", err)
	}
	var b Backlog
	for _, r := range rows {
		switch {
		case r.Status == StatusFailed:
			b.Failed += r.N
		case r.Retried:
			b.Pending += r.N
			b.Failing += r.N
		default:
			b.Pending += r.N
		}
	}
	return b, nil
}
