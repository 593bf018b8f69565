package webhooks

import (
	"context"
	"fmt"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
)

// dispatchBatch is how many events one dispatch transaction takes.
const dispatchBatch = 200

// Dispatch numbers the events committed since the last dispatch for the
// feed, oldest first, and owes each to its consumer's enabled endpoints that
// take its type, all in one transaction per batch; it returns how many
// events it dispatched. One dispatch runs at a time across replicas (each
// locks the dispatcher's row first), so positions are handed out in the
// order their batches commit: a feed read after a position never misses an
// event. An endpoint disabled (or registered later) is not owed the events
// dispatched meanwhile; the feed still has them.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.dispatchOnce(ctx)
		total += n
		if err != nil || n < dispatchBatch {
			return total, err
		}
	}
}

func (s *Service) dispatchOnce(ctx context.Context) (int, error) {
	var n int
	err := database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		n = 0
		// The lock, first: an UPDATE locks the row on MySQL, and takes
		// SQLite's write lock, before anything is read.
		if err := tx.Exec("UPDATE event_dispatcher SET last_position = last_position WHERE id = 1").Error; err != nil {
			return fmt.Errorf("lock the event dispatcher: %w", err)
		}
		mysql := tx.Dialector.Name() == "mysql"
		var last uint64
		var batch []events.Event
		undispatched := tx.Select("id", "consumer_id", "type").Where("position IS NULL").Order("id").Limit(dispatchBatch)
		if mysql {
			// Transactions commit in any order: the undispatched are found by
			// their NULL position (indexed), whatever their ids.
			if err := tx.Raw("SELECT last_position FROM event_dispatcher WHERE id = 1 FOR UPDATE").Scan(&last).Error; err != nil {
				return fmt.Errorf("read the event dispatcher: %w", err)
			}
		} else {
			// One writer at a time: events commit in the order of their ids
			// (AUTOINCREMENT, never reused), so those after the last one
			// numbered are the undispatched, read by the primary key.
			var row struct{ LastPosition, LastEventID uint64 }
			if err := tx.Raw("SELECT last_position, last_event_id FROM event_dispatcher WHERE id = 1").Scan(&row).Error; err != nil {
				return fmt.Errorf("read the event dispatcher: %w", err)
			}
			last = row.LastPosition
			undispatched = undispatched.Where("id > ?", row.LastEventID)
		}
		if err := undispatched.Find(&batch).Error; err != nil {
			return fmt.Errorf("read the events to dispatch: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		owed, err := s.owed(tx, batch)
		if err != nil {
			return err
		}
		// One statement text per kind, whatever the batch (see padded): a
		// row at a time.
		for i := range owed {
			if err := tx.Create(&owed[i]).Error; err != nil {
				return fmt.Errorf("record deliveries: %w", err)
			}
		}
		for i, e := range batch {
			res := tx.Exec("UPDATE consumer_events SET position = ? WHERE id = ? AND position IS NULL", last+uint64(i)+1, e.Seq)
			if res.Error != nil {
				return fmt.Errorf("number the events: %w", res.Error)
			}
			if res.RowsAffected != 1 {
				return fmt.Errorf("number the events: event %d was numbered meanwhile", e.Seq)
			}
		}
		advance := tx.Exec("UPDATE event_dispatcher SET last_position = ? WHERE id = 1", last+uint64(len(batch)))
		if !mysql {
			advance = tx.Exec("UPDATE event_dispatcher SET last_position = ?, last_event_id = ? WHERE id = 1",
				last+uint64(len(batch)), batch[len(batch)-1].Seq)
		}
		if err := advance.Error; err != nil {
			return fmt.Errorf("advance the event dispatcher: %w", err)
		}
		n = len(batch)
		return nil
	})
	return n, err
}

// owed is the deliveries the batch's events owe: one per event and enabled
// endpoint of its consumer that takes its type.
func (s *Service) owed(tx *gorm.DB, batch []events.Event) ([]Delivery, error) {
	consumers := make([]string, 0, len(batch))
	seen := map[string]bool{}
	for _, e := range batch {
		if !seen[e.ConsumerID] {
			seen[e.ConsumerID] = true
			consumers = append(consumers, e.ConsumerID)
		}
	}
	// A locking read on MySQL: an endpoint deleted or disabled by a
	// transaction that committed after this one's snapshot is not owed
	// anything (its DELETE or UPDATE waits for this transaction, or this
	// read for it). SQLite runs one writer at a time.
	read := "SELECT id, consumer_id, events FROM webhook_endpoints WHERE consumer_id IN ? AND enabled = ?"
	if tx.Dialector.Name() == "mysql" {
		read += " LOCK IN SHARE MODE"
	}
	var endpoints []Endpoint
	if err := tx.Raw(read, padded(consumers, dispatchBatch), true).Scan(&endpoints).Error; err != nil {
		return nil, fmt.Errorf("read the endpoints to deliver to: %w", err)
	}
	if len(endpoints) == 0 {
		return nil, nil
	}
	type subscriber struct {
		id    string
		types []string
	}
	byConsumer := map[string][]subscriber{}
	for _, ep := range endpoints {
		byConsumer[ep.ConsumerID] = append(byConsumer[ep.ConsumerID], subscriber{ep.ID, ep.Types()})
	}
	now := s.now()
	var owed []Delivery
	for _, e := range batch {
		for _, ep := range byConsumer[e.ConsumerID] {
			if !events.Matches(ep.types, e.Type) {
				continue
			}
			owed = append(owed, Delivery{ID: ulid.Make().String(), EndpointID: ep.id, EventID: e.Seq, ConsumerID: e.ConsumerID,
				Status: StatusPending, NextAttemptAt: &now, WindowStart: now, CreatedAt: now, UpdatedAt: now})
		}
	}
	return owed, nil
}
