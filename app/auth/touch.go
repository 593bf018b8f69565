package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
)

const (
	touchEvery        = time.Minute     // how often, at most, a token's last_used_at is written
	writeEvery        = time.Second     // how often RunTouchWriter writes the recorded uses
	finalFlushTimeout = 5 * time.Second // RunTouchWriter's last write, once its ctx has ended

	// maxTouched bounds the memory of recent uses, written or not: past it,
	// written entries older than touchEvery are dropped, and if none is, the
	// new use is not recorded (the token's next use, once room is made, is).
	maxTouched = 10000
)

// uses throttles the writes to last_used_at, and holds what is to be written.
type uses struct {
	limit    int           // maxTouched; tests lower it
	interval time.Duration // writeEvery; tests shorten it

	mu      sync.Mutex
	byID    map[string]use // token id → its latest recorded use
	pending int            // entries of byID with pending set
	dropped int            // uses not recorded since the last flush, memory full

	flushing chan struct{} // held by the one flush writing at a time
}

// use is a token's latest use this process recorded.
type use struct {
	at      time.Time
	pending bool // at is not yet written to last_used_at
}

func newUses() uses {
	return uses{
		limit:    maxTouched,
		interval: writeEvery,
		byID:     map[string]use{},
		flushing: make(chan struct{}, 1),
	}
}

// recordUse notes tok's use for the writer, without touching the database,
// unless the row's last_used_at or the last recorded use is under
// touchEvery old.
func (s *Service) recordUse(tok Token, now time.Time) {
	if tok.LastUsedAt != nil && now.Sub(*tok.LastUsedAt) < touchEvery {
		return
	}
	u := &s.uses
	u.mu.Lock()
	defer u.mu.Unlock()
	if last, ok := u.byID[tok.ID]; ok {
		if now.Sub(last.at) < touchEvery {
			return
		}
		if !last.pending {
			u.pending++
		}
		u.byID[tok.ID] = use{at: now, pending: true}
		return
	}
	if len(u.byID) >= u.limit { // forget what no longer throttles anything
		for id, e := range u.byID {
			if !e.pending && now.Sub(e.at) >= touchEvery {
				delete(u.byID, id)
			}
		}
		if len(u.byID) >= u.limit {
			u.dropped++
			return
		}
	}
	u.byID[tok.ID] = use{at: now, pending: true}
	u.pending++
}

// Pending is how many recorded token uses are not yet written (at most
// maxTouched).
func (s *Service) Pending() int {
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	return s.uses.pending
}

// RunTouchWriter writes the recorded token uses every second until ctx
// ends, then what is left, in a few seconds of its own. Run it once per
// Service while it verifies tokens, and wait for it before closing the
// database.
func (s *Service) RunTouchWriter(ctx context.Context) {
	tick := time.NewTicker(s.uses.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			defer cancel()
			if err := s.Flush(ctx); err != nil {
				s.log.Warn("record token uses at shutdown", "unwritten", s.Pending(), "error", err)
			}
			return
		case <-tick.C:
			// Each failed write is already logged at warn; what ctx's end
			// interrupts stays pending for the final write above.
			if err := s.Flush(ctx); err != nil {
				s.log.Debug("record token uses", "unwritten", s.Pending(), "error", err)
			}
		}
	}
}

// Flush writes every recorded token use now, one at a time, and returns
// the failed writes' errors, joined. A failed write is logged and
// forgotten: the token's next use records it again. If ctx ends first, the
// uses not yet written stay recorded. Flushes run one at a time.
func (s *Service) Flush(ctx context.Context) error {
	u := &s.uses
	select {
	case u.flushing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-u.flushing }()

	type item struct {
		id string
		at time.Time
	}
	u.mu.Lock()
	batch := make([]item, 0, u.pending)
	for id, e := range u.byID {
		if e.pending {
			batch = append(batch, item{id, e.at})
		}
	}
	dropped := u.dropped
	u.dropped = 0
	u.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("token uses not recorded: memory full", "dropped", dropped, "limit", u.limit)
	}

	var errs []error
	for _, it := range batch {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		at := dbtime.Stamp(it.at)
		// Replicas write the same row at times: on MySQL (and Galera) one of
		// two such writes can be a deadlock, retried like every other write.
		err := database.RetryOnConflict(ctx, func() *gorm.DB {
			return s.db.WithContext(ctx).Model(&Token{}).Where("id = ?", it.id).UpdateColumn("last_used_at", at)
		}).Error
		interrupted := err != nil && ctx.Err() != nil
		u.mu.Lock()
		// Settle the entry unless a newer use was recorded meanwhile, or
		// ctx's end cut the write short (it stays pending then).
		if e, ok := u.byID[it.id]; ok && e.pending && e.at.Equal(it.at) && !interrupted {
			if err == nil {
				u.byID[it.id] = use{at: e.at}
			} else {
				delete(u.byID, it.id)
			}
			u.pending--
		}
		u.mu.Unlock()
		if interrupted {
			return errors.Join(append(errs, ctx.Err())...)
		}
		if err != nil {
			s.log.Warn("record token use", "token_id", it.id, "error", err)
			errs = append(errs, fmt.Errorf("record use of token %s: %w", it.id, err))
		}
	}
	return errors.Join(errs...)
}
