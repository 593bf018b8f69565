package database

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"
)

// GroupCommit runs the short writes of concurrent requests through one writer
// that commits whatever is waiting in one transaction: on SQLite, where every
// write takes the one write lock in turn anyway, N requests pay for one
// commit. Each write runs in a savepoint, so one that fails is rolled back
// alone, and no caller hears "done" before the commit holding its write
// succeeded. A write waiting alone runs in its own transaction, no savepoint.
// MySQL does not use it: InnoDB already groups concurrent commits' log
// flushes, and one transaction holding several requests' row locks would
// only widen deadlocks between replicas.
type GroupCommit struct {
	db       *gorm.DB
	maxBatch int
	ops      chan *groupOp
	closed   chan struct{} // closed by Close: the writer stops
	wg       sync.WaitGroup

	mu      sync.RWMutex // Do sends under R, Close marks closing under W
	closing bool

	batches, writes atomic.Int64
}

type groupOp struct {
	ctx  context.Context
	fn   func(tx *gorm.DB) error
	done chan error // buffered: the writer never waits for the caller
}

// ErrGroupClosed is Do's error after Close.
var ErrGroupClosed = errors.New("database: group commit closed")

// NewGroupCommit starts the writer on db; at most maxBatch writes share a
// transaction (64 when maxBatch is not positive). Close stops it.
func NewGroupCommit(db *gorm.DB, maxBatch int) *GroupCommit {
	if maxBatch <= 0 {
		maxBatch = 64
	}
	g := &GroupCommit{db: db, maxBatch: maxBatch, ops: make(chan *groupOp, maxBatch), closed: make(chan struct{})}
	g.wg.Go(g.run)
	return g
}

// Do runs fn in the next batch and returns its error, or the commit's. fn
// must only write through tx (and may read through it what it wrote), and
// must not commit or roll back. A write handed over runs and is waited for
// even when ctx ends meanwhile: its caller must know whether it committed.
func (g *GroupCommit) Do(ctx context.Context, fn func(tx *gorm.DB) error) error {
	op := &groupOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	g.mu.RLock()
	if g.closing {
		g.mu.RUnlock()
		return ErrGroupClosed
	}
	select {
	case g.ops <- op: // the writer runs until Close has the lock, so this send ends
	case <-ctx.Done():
		g.mu.RUnlock()
		return ctx.Err()
	}
	g.mu.RUnlock()
	return <-op.done
}

// Stats reports how many transactions the writer committed and how many
// writes they held.
func (g *GroupCommit) Stats() (batches, writes int64) { return g.batches.Load(), g.writes.Load() }

// Close stops taking writes and waits for the writer to finish the batch in
// hand; writes still queued get ErrGroupClosed.
func (g *GroupCommit) Close() {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return
	}
	g.closing = true // no Do sends after this
	g.mu.Unlock()
	close(g.closed)
	g.wg.Wait()
	for {
		select {
		case op := <-g.ops:
			op.done <- ErrGroupClosed
		default:
			return
		}
	}
}

func (g *GroupCommit) run() {
	for {
		var first *groupOp
		select {
		case first = <-g.ops:
		case <-g.closed:
			return
		}
		batch := []*groupOp{first}
	fill:
		for len(batch) < g.maxBatch {
			select {
			case op := <-g.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		g.commit(batch)
	}
}

func (g *GroupCommit) commit(batch []*groupOp) {
	g.batches.Add(1)
	g.writes.Add(int64(len(batch)))
	// The writes run on the writer's own context, detached from their
	// callers': a caller that hangs up must not interrupt a statement of a
	// transaction that holds other callers' writes. Each statement keeps its
	// DB_QUERY_TIMEOUT.
	ctx := context.WithoutCancel(batch[0].ctx)
	if len(batch) == 1 {
		op := batch[0]
		op.done <- g.db.WithContext(ctx).Transaction(op.fn)
		return
	}
	errs := make([]error, len(batch))
	err := g.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i, op := range batch {
			sp := fmt.Sprintf("w%d", i)
			if err := tx.Exec("SAVEPOINT " + sp).Error; err != nil {
				return err
			}
			if errs[i] = op.fn(tx); errs[i] != nil {
				if err := tx.Exec("ROLLBACK TO " + sp).Error; err != nil {
					return err // the transaction is in doubt: the whole batch fails
				}
			}
			if err := tx.Exec("RELEASE " + sp).Error; err != nil {
				return err
			}
		}
		return nil
	})
	for i, op := range batch {
		switch {
		case errs[i] != nil:
			op.done <- errs[i] // nothing of it was committed, whatever the commit did
		case err != nil:
			op.done <- fmt.Errorf("group commit: %w", err)
		default:
			op.done <- nil
		}
	}
}
