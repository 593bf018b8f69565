package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/licensor-api/licensor/database"
)

// How a claim stays fair. Deliveries are claimed endpoint by endpoint, never
// oldest-first across all of them: a consumer whose endpoints never answer
// owes thousands of deliveries, and oldest-first would hand every sender to
// them. Instead:
//
//   - the endpoints with due deliveries are taken in the order they were
//     last claimed for (never first), so every endpoint gets its turn;
//   - at most EndpointConcurrency attempts are in flight to one endpoint,
//     across replicas (the in-flight are counted from the claims that hold
//     their lease), so a slow endpoint ties up that many senders at most;
//   - consumers are served in turn, one delivery each per round, and none
//     holds more than its share of a worker's senders (see share), so one
//     consumer with many endpoints cannot take them all;
//   - an endpoint paused by its circuit breaker (paused_until) is not
//     claimed for at all until the pause ends.

// candidateLimit is how many endpoints with due deliveries one claim weighs.
const candidateLimit = 64

// candidate is an enabled, unpaused endpoint with deliveries due.
type candidate struct {
	EndpointID string `gorm:"column:id"`
	ConsumerID string
}

// pick is how many of an endpoint's due deliveries a claim takes.
type pick struct {
	endpointID string
	n          int
}

// share is how many of a worker's senders one consumer may hold while
// active consumers have work (the consumers with due deliveries or with
// attempts in flight): an equal part of one more than them, so that some
// senders are always free for a consumer whose first delivery just became
// due, and at least one.
func share(senders, active int) int {
	return max(1, senders/(active+1))
}

// plan decides the claim: slots senders are free, held counts the senders
// each consumer holds in this worker, inFlight the attempts in flight to
// each endpoint across workers. Consumers take turns in the order their
// first candidate comes, one delivery a turn, each from its endpoints in
// rotation, until the slots, the consumers' shares or the endpoints' room
// run out.
func plan(cands []candidate, inFlight map[string]int, perEndpoint, slots, senders int, held map[string]int) []pick {
	var order []string
	queue := map[string][]string{}
	active := map[string]bool{}
	for c, n := range held {
		if n > 0 {
			active[c] = true
		}
	}
	for _, c := range cands {
		active[c.ConsumerID] = true
		if perEndpoint-inFlight[c.EndpointID] <= 0 {
			continue
		}
		if queue[c.ConsumerID] == nil {
			order = append(order, c.ConsumerID)
		}
		queue[c.ConsumerID] = append(queue[c.ConsumerID], c.EndpointID)
	}
	allowance := map[string]int{}
	for _, c := range order {
		allowance[c] = share(senders, len(active)) - held[c]
	}
	taken := map[string]int{}
	var picks []pick
	for progressed := true; progressed && slots > 0; {
		progressed = false
		for _, c := range order {
			if slots == 0 {
				break
			}
			if allowance[c] <= 0 || len(queue[c]) == 0 {
				continue
			}
			e := queue[c][0]
			if taken[e] == 0 {
				picks = append(picks, pick{endpointID: e})
			}
			taken[e]++
			slots--
			allowance[c]--
			progressed = true
			if inFlight[e]+taken[e] >= perEndpoint {
				queue[c] = queue[c][1:]
			} else {
				queue[c] = append(queue[c][1:], e)
			}
		}
	}
	for i := range picks {
		picks[i].n = taken[picks[i].endpointID]
	}
	return picks
}

// claim takes up to slots due deliveries under a new claim, as plan shares
// them out (held: the senders each consumer holds in this worker): their
// next_attempt_at moves to the end of the lease, so that no other worker
// takes them meanwhile and, should this one die, they are due again when it
// ends. On MySQL the transaction reads committed rows (each statement sees
// what other workers committed before it) and the endpoints planned for are
// locked FOR UPDATE SKIP LOCKED before their in-flight attempts are counted
// again, so that two workers never count one endpoint at once (one skips it
// and serves others); on SQLite the transaction holds the one write lock.
// The UPDATE is a compare-and-set (rows still pending and due), so two
// workers never hold one delivery. Due deliveries of a disabled endpoint
// (owed as it was being disabled) are parked first, as disabling parks
// them.
func (s *Service) claim(ctx context.Context, slots int, held map[string]int) ([]claimed, error) {
	if slots <= 0 {
		return nil, nil
	}
	id := ulid.Make().String()
	now := s.now()
	until := now.Add(s.lease())
	var rows []Delivery
	err := s.claimTransaction(ctx, func(tx *gorm.DB) error {
		rows = nil
		if err := parkDueOfDisabled(tx, now); err != nil {
			return err
		}
		cands, err := candidates(tx, now, s.cfg.EndpointConcurrency, sated(held))
		if err != nil || len(cands) == 0 {
			return err
		}
		counts, err := inFlight(tx, endpointIDs(cands), now)
		if err != nil {
			return err
		}
		picks := plan(cands, counts, s.cfg.EndpointConcurrency, slots, senders, held)
		if tx.Dialector.Name() == database.MySQL {
			if picks, err = s.lockPicks(tx, picks, now); err != nil {
				return err
			}
		}
		var ids, claimedFor []string
		for _, p := range picks {
			var due []string
			err := tx.Model(&Delivery{}).Where("endpoint_id = ? AND status = ? AND next_attempt_at <= ?", p.endpointID, StatusPending, now).
				Order("next_attempt_at, id").Limit(s.cfg.EndpointConcurrency).Pluck("id", &due).Error
			if err != nil {
				return fmt.Errorf("find the endpoint's due webhook deliveries: %w", err)
			}
			if len(due) > 0 {
				ids = append(ids, due[:min(p.n, len(due))]...)
				claimedFor = append(claimedFor, p.endpointID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		res := tx.Model(&Delivery{}).Where("id IN ? AND status = ? AND next_attempt_at <= ?", padded(ids, senders), StatusPending, now).
			Updates(map[string]any{"claim": id, "next_attempt_at": until, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("claim webhook deliveries: %w", res.Error)
		}
		// Bookkeeping of the claim's order, not a change of the endpoint's:
		// its updated_at stays.
		err = tx.Model(&Endpoint{}).Where("id IN ?", padded(claimedFor, senders)).UpdateColumn("last_claimed_at", now).Error
		if err != nil {
			return fmt.Errorf("record the endpoints claimed for: %w", err)
		}
		return tx.Where("claim = ?", id).Order("next_attempt_at, id").Find(&rows).Error
	})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	// Claimed and committed: reading what sending them needs must not be cut
	// short by a shutdown, and a failure gives them back rather than leave
	// their endpoints counting them in flight for a whole lease.
	out, err := s.withSubjects(context.WithoutCancel(ctx), rows, now)
	if err != nil {
		for _, d := range rows {
			if rerr := s.release(ctx, claimed{Delivery: d}); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return nil, err
	}
	return out, nil
}

// claimTransaction runs a claim in one transaction, again whole while it
// loses a lock conflict; on MySQL at READ COMMITTED, so that the in-flight
// count made after an endpoint is locked sees every claim committed before
// (at REPEATABLE READ it would see the snapshot of the transaction's first
// read).
func (s *Service) claimTransaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var readCommitted []*sql.TxOptions
	if s.db.Dialector.Name() == database.MySQL {
		readCommitted = append(readCommitted, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	return database.Transact(ctx, s.db, s.cfg.Retry, fn, readCommitted...)
}

// lockPicks locks the endpoints planned for, skipping those another claim
// holds (that worker serves them), and counts their in-flight attempts
// again now that no other claim can change them: a pick keeps only the
// room its endpoint still has.
func (s *Service) lockPicks(tx *gorm.DB, picks []pick, now time.Time) ([]pick, error) {
	if len(picks) == 0 {
		return nil, nil
	}
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = p.endpointID
	}
	var locked []string
	err := tx.Model(&Endpoint{}).Where("id IN ?", padded(ids, senders)).
		Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).Pluck("id", &locked).Error
	if err != nil {
		return nil, fmt.Errorf("lock the endpoints claimed for: %w", err)
	}
	counts, err := inFlight(tx, locked, now)
	if err != nil {
		return nil, err
	}
	mine := make(map[string]bool, len(locked))
	for _, id := range locked {
		mine[id] = true
	}
	out := picks[:0]
	for _, p := range picks {
		if p.n = min(p.n, s.cfg.EndpointConcurrency-counts[p.endpointID]); mine[p.endpointID] && p.n > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// sated are the consumers that hold at least the most senders any share
// could give them now (share with only the consumers holding senders
// active): plan would give them nothing, so candidates leaves their
// endpoints out rather than let them fill its window.
func sated(held map[string]int) []string {
	var out []string
	for c, n := range held {
		if n >= share(senders, len(held)) {
			out = append(out, c)
		}
	}
	return out
}

func endpointIDs(cands []candidate) []string {
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.EndpointID
	}
	return ids
}

// candidates are the enabled, unpaused endpoints with deliveries due and
// room for another attempt (fewer than perEndpoint in flight), of consumers
// other than those in sated, the one claimed for longest ago (or never:
// NULL sorts first on both databases) first. Leaving out what plan could
// not use keeps a window of busy endpoints from hiding the others.
func candidates(tx *gorm.DB, now time.Time, perEndpoint int, sated []string) ([]candidate, error) {
	var cands []candidate
	err := tx.Raw("SELECT id, consumer_id FROM webhook_endpoints WHERE enabled = ? AND (paused_until IS NULL OR paused_until <= ?) "+
		"AND consumer_id NOT IN ? "+
		"AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = webhook_endpoints.id AND d.status = ? AND d.next_attempt_at <= ?) "+
		"AND (SELECT COUNT(*) FROM webhook_deliveries f WHERE f.endpoint_id = webhook_endpoints.id AND f.status = ? "+
		"AND f.claim IS NOT NULL AND f.next_attempt_at > ?) < ? "+
		"ORDER BY last_claimed_at, id LIMIT ?",
		true, now, padded(sated, senders), StatusPending, now, StatusPending, now, perEndpoint, candidateLimit).Scan(&cands).Error
	if err != nil {
		return nil, fmt.Errorf("find endpoints with due webhook deliveries: %w", err)
	}
	return cands, nil
}

// inFlight counts, per endpoint of ids, the attempts in flight to it: its
// deliveries under a claim whose lease has not lapsed.
func inFlight(tx *gorm.DB, ids []string, now time.Time) (map[string]int, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var counts []struct {
		EndpointID string
		N          int
	}
	err := tx.Model(&Delivery{}).Select("endpoint_id, COUNT(*) AS n").
		Where("endpoint_id IN ? AND status = ? AND claim IS NOT NULL AND next_attempt_at > ?", padded(ids, candidateLimit), StatusPending, now).
		Group("endpoint_id").Scan(&counts).Error
	if err != nil {
		return nil, fmt.Errorf("count the webhook deliveries in flight: %w", err)
	}
	out := make(map[string]int, len(counts))
	for _, c := range counts {
		out[c.EndpointID] = c.N
	}
	return out, nil
}

// parkDueOfDisabled parks the due deliveries of disabled endpoints (owed as
// the endpoint was being disabled, or whose claim lapsed): no next attempt
// until the endpoint is enabled again. They are found by a plain read and
// parked by a compare-and-set that asks again that their endpoint is still
// disabled, so that one enabled meanwhile keeps its deliveries due.
func parkDueOfDisabled(tx *gorm.DB, now time.Time) error {
	var due []struct{ ID, EndpointID string }
	err := tx.Raw("SELECT d.id, d.endpoint_id FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id "+
		"WHERE e.enabled = ? AND d.status = ? AND d.next_attempt_at <= ? LIMIT ?", false, StatusPending, now, senders).Scan(&due).Error
	if err != nil {
		return fmt.Errorf("find due deliveries of disabled endpoints: %w", err)
	}
	if len(due) == 0 {
		return nil
	}
	ids, endpointIDs := make([]string, len(due)), make([]string, len(due))
	for i, d := range due {
		ids[i], endpointIDs[i] = d.ID, d.EndpointID
	}
	// Read by their primary key: only these endpoints' rows are read (and,
	// on MySQL, locked) by the UPDATE.
	disabled := tx.Model(&Endpoint{}).Select("id").Where("id IN ? AND enabled = ?", padded(endpointIDs, senders), false)
	err = tx.Model(&Delivery{}).
		Where("id IN ? AND status = ? AND next_attempt_at <= ? AND endpoint_id IN (?)", padded(ids, senders), StatusPending, now, disabled).
		Updates(map[string]any{"next_attempt_at": nil, "claim": nil, "updated_at": now}).Error // due: any claim on it has lapsed
	if err != nil {
		return fmt.Errorf("park the deliveries of disabled endpoints: %w", err)
	}
	return nil
}
