package events

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoConsumer is ForSubject asked without the subject's consumer.
var ErrNoConsumer = errors.New("events: a subject's events are read within its consumer's")

// ForSubject returns at most limit events of one subject of the consumer
// (a license), oldest first, dispatched or not, for an operator's page of
// one license. Data is left empty: it carries the license key, which the
// page does not show, so it is neither fetched nor opened.
//
// consumer_events has no index on its subject, on purpose: every license
// change writes a row, and pays for each index. This scans the consumer's
// events through (consumer_id, position), which an operator's page can
// afford and a request's path could not. It orders by sequence, not id:
// ordered by id, MariaDB walks the primary key of every consumer's events
// to meet the LIMIT instead.
func (l *Log) ForSubject(ctx context.Context, consumerID, subjectID string, limit int) ([]Event, error) {
	if consumerID == "" {
		return nil, ErrNoConsumer
	}
	var rows []Event
	err := l.read.WithContext(ctx).Omit("data").Where("consumer_id = ? AND subject_id = ?", consumerID, subjectID).
		Order("sequence, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list the events of %s: %w", subjectID, err)
	}
	return rows, nil
}
