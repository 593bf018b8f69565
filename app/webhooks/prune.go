package webhooks

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
)

// Prune deletes the consumer events written before before (now less
// EVENTS_TTL) that have been dispatched and are owed to no endpoint any
// more, with their deliveries and those deliveries' attempts, batch events
// per transaction; it returns how many events it deleted. An event still
// pending somewhere is kept, whatever its age, until that delivery is
// settled; one not yet dispatched is kept for the dispatcher.
func (s *Service) Prune(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 500
	}
	before = before.UTC()
	var total int64
	var cursor uint64 // the events up to it are read
	young := 0        // events too young to prune, read one after another
	for {
		// The oldest events first, by id (written in time order, give or
		// take the replicas' clocks): no index on the time, so that an
		// event's INSERT maintains one index less. A pass ends once a whole
		// batch of events in a row is too young, so it reads the expired
		// rows and one batch more, and an event dated ahead (a replica's
		// clock far off) holds back none written after it.
		var rows []events.Event
		err := s.db.WithContext(ctx).Select("id", "created_at", "position").Where("id > ?", cursor).
			Order("id").Limit(batch).Find(&rows).Error
		if err != nil {
			return total, fmt.Errorf("list expired consumer events: %w", err)
		}
		var ids []uint64
		for _, e := range rows {
			cursor = e.Seq
			if !e.CreatedAt.Before(before) {
				young++
				continue
			}
			young = 0
			if e.Position != nil { // one not yet dispatched is the dispatcher's
				ids = append(ids, e.Seq)
			}
		}
		last := young >= batch || len(rows) < batch
		if len(ids) == 0 {
			if last {
				return total, nil
			}
			continue
		}
		// An event still owed somewhere is kept whole, its deliveries
		// with it, until that delivery is settled.
		pending := s.db.Model(&Delivery{}).Select("1").Where("webhook_deliveries.event_id = consumer_events.id AND status = ?", StatusPending)
		err = s.db.WithContext(ctx).Model(&events.Event{}).Where("id IN ? AND NOT EXISTS (?)", padded(ids, batch), pending).
			Pluck("id", &ids).Error
		if err != nil {
			return total, fmt.Errorf("list expired consumer events: %w", err)
		}
		if len(ids) == 0 {
			if last {
				return total, nil
			}
			continue
		}
		ids = padded(ids, batch)
		var n int64
		err = database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
			// A delivery retried meanwhile is pending again: it is kept, and
			// so is its event.
			settled := tx.Model(&Delivery{}).Select("id").Where("event_id IN ? AND status <> ?", ids, StatusPending)
			if err := tx.Where("delivery_id IN (?)", settled).Delete(&Attempt{}).Error; err != nil {
				return fmt.Errorf("delete expired webhook attempts: %w", err)
			}
			if err := tx.Where("event_id IN ? AND status <> ?", ids, StatusPending).Delete(&Delivery{}).Error; err != nil {
				return fmt.Errorf("delete expired webhook deliveries: %w", err)
			}
			owed := tx.Model(&Delivery{}).Select("1").Where("webhook_deliveries.event_id = consumer_events.id")
			res := tx.Where("id IN ? AND NOT EXISTS (?)", ids, owed).Delete(&events.Event{})
			if res.Error != nil {
				return fmt.Errorf("delete expired consumer events: %w", res.Error)
			}
			n = res.RowsAffected
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if last {
			return total, nil
		}
	}
}
