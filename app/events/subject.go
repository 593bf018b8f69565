package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// SubjectEvent is one event of a subject (a license) as an operator's page
// shows it: the row (its type, sequence, created_at, and its place in the
// feed, nil until dispatched), the body the feed lists and a webhook sends,
// and the license as the event carries it.
type SubjectEvent struct {
	Event
	// Body is the event as the feed lists it (see Log.Body); nil when no
	// configured key opens its data.
	Body json.RawMessage
	// License is the license as the event carries it ({"license": …}, its
	// key included); nil for an event of another kind (a webhook
	// endpoint's), or when its data cannot be opened.
	License *License
	// KeyUnavailable says no configured key opens the event's data
	// (APP_KEY and APP_PREVIOUS_KEYS): it is listed all the same, without
	// Body and License.
	KeyUnavailable bool
}

// DefaultSubjectLimit is how many events ForSubject returns when its limit
// is not positive.
const DefaultSubjectLimit = 100

// ErrNoConsumer is ForSubject asked without the subject's consumer.
var ErrNoConsumer = errors.New("events: a subject's events are read within its consumer's")

// ForSubject returns the events of one subject of the consumer (a license,
// by its id: consumerID is the license's ConsumerID), oldest first (by
// their sequence, then the order they were written in), at most limit of
// them (DefaultSubjectLimit when limit is not positive; ask for one more
// than shown to know whether more follow), dispatched to the feed or not
// yet. For an operator's page of one license.
//
// consumer_events has no index on its subject, on purpose: every license
// change writes a row, and pays for each index. This reads the consumer's
// events through the index on (consumer_id, position) and keeps the
// subject's: a scan of one consumer's events, which an operator's page can
// afford and a request's path could not. limit bounds what is returned and
// opened, not what is scanned. The order is the subject's sequence (which
// is its events' order), not the id: ordered by id, MariaDB walks the
// primary key of every consumer's events to meet the LIMIT instead. An event whose data no configured key opens
// is returned with KeyUnavailable set rather than failing the read.
func (l *Log) ForSubject(ctx context.Context, consumerID, subjectID string, limit int) ([]SubjectEvent, error) {
	if consumerID == "" {
		return nil, ErrNoConsumer
	}
	if limit <= 0 {
		limit = DefaultSubjectLimit
	}
	var rows []Event
	err := l.read.WithContext(ctx).Where("consumer_id = ? AND subject_id = ?", consumerID, subjectID).
		Order("sequence, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list the events of %s: %w", subjectID, err)
	}
	out := make([]SubjectEvent, len(rows))
	for i, e := range rows {
		out[i] = SubjectEvent{Event: e}
		data, err := l.cipher.Decrypt(e.Data)
		if err != nil {
			out[i].KeyUnavailable = true
			continue
		}
		if out[i].Body, err = body(e, data); err != nil {
			return nil, fmt.Errorf("render event %s: %w", e.ID, err)
		}
		var d struct {
			License *License `json:"license"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("read the data of event %s: %w", e.ID, err)
		}
		out[i].License = d.License
	}
	return out, nil
}
