package events

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoConsumer is ForSubject asked without the subject's consumer.
var ErrNoConsumer = errors.New("events: a subject's events are read within its consumer's")

// ForSubject returns the events of one subject of the consumer (a license,
// by its id: consumerID is the license's ConsumerID), oldest first (by
// their sequence, then the order they were written in), at most limit of
// them (ask for one more than shown to know whether more follow),
// dispatched to the feed or not yet. For an operator's page of one
// license, which shows what happened and when: each event's type,
// sequence, time and place in the feed. Its data is not read (Data is
// empty): it carries the license key, which the page does not show, so it
// is neither fetched nor opened.
//
// consumer_events has no index on its subject, on purpose: every license
// change writes a row, and pays for each index. This reads the consumer's
// events through the index on (consumer_id, position) and keeps the
// subject's: a scan of one consumer's events, which an operator's page can
// afford and a request's path could not. limit bounds what is returned,
// not what is scanned. The order is the subject's sequence (which is its
// events' order), not the id: ordered by id, MariaDB walks the primary key
// of every consumer's events to meet the LIMIT instead.
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
