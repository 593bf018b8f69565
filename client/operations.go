package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/licensor-api/licensor/internal/wait"
)

// Statuses of an Operation.
const (
	OperationPending    = "pending"    // the outcome is unknown; the reconciler is settling it
	OperationProcessing = "processing" // a request is executing it right now
	OperationCompleted  = "completed"  // Result says the answer
	OperationFailed     = "failed"     // licensor gave up for now: repeat the request with the same key
)

// DefaultOperationPoll is how long WaitOperation waits between two reads
// when the API gives no Retry-After: the Retry-After of a 202.
const DefaultOperationPoll = 5 * time.Second

// Operation is an intent a 202 operation_pending named
// (GET /api/operations/{id}).
type Operation struct {
	ID        string           `json:"id"`
	Operation string           `json:"operation"` // "licenses.store" (a create) or "licenses.destroy" (a revoke)
	Status    string           `json:"status"`    // OperationPending, …; also "abandoned", "superseded", "discarded"
	Attempts  int              `json:"attempts"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	Result    *OperationResult `json:"result"` // once completed
}

// OperationResult is the answer a completed operation stored: its Status
// (201 with the new license's Location, 200, or 204 for a revoke).
type OperationResult struct {
	Status   int    `json:"status"`
	Location string `json:"location"`
}

// Settled reports whether the operation's status is final for
// WaitOperation: anything but pending and processing.
func (o Operation) Settled() bool {
	return o.Status != OperationPending && o.Status != OperationProcessing
}

// GetOperation reads the operation with that id (ability licenses:read).
func (c *Client) GetOperation(ctx context.Context, id string) (Operation, error) {
	op, _, err := c.getOperation(ctx, id)
	return op, err
}

func (c *Client) getOperation(ctx context.Context, id string) (Operation, time.Duration, error) {
	if id == "" {
		return Operation{}, 0, errors.New("get operation: the id is empty")
	}
	resp, err := c.do(ctx, request{op: "get operation " + id, method: http.MethodGet,
		path: "/api/operations/" + url.PathEscape(id), success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return Operation{}, 0, err
	}
	op, err := decodeData[Operation]("get operation "+id, resp.body)
	if err != nil {
		return Operation{}, 0, err
	}
	retryAfter, _ := wait.RetryAfter(resp.header.Get("Retry-After"), time.Now())
	return op, retryAfter, nil
}

// WaitOperation reads the operation until it is Settled and returns it.
// Between reads it waits poll (the 202's APIError.RetryAfter; ≤ 0:
// DefaultOperationPoll), or the read's longer Retry-After. When ctx ends, or
// the next wait would pass its deadline, it returns the operation as last
// read with the context's error.
//
//	var apiErr *client.APIError
//	if errors.As(err, &apiErr) && apiErr.OperationID != "" {
//		op, err := c.WaitOperation(ctx, apiErr.OperationID, apiErr.RetryAfter)
//		…
//	}
func (c *Client) WaitOperation(ctx context.Context, id string, poll time.Duration) (Operation, error) {
	if poll <= 0 {
		poll = DefaultOperationPoll
	}
	for {
		op, given, err := c.getOperation(ctx, id)
		if err != nil {
			return Operation{}, fmt.Errorf("wait for operation %s: %w", id, err)
		}
		if op.Settled() {
			return op, nil
		}
		wait := max(poll, given)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return op, fmt.Errorf("wait for operation %s: still %s: %w", id, op.Status, context.DeadlineExceeded)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return op, fmt.Errorf("wait for operation %s: still %s: %w", id, op.Status, err)
		}
	}
}
