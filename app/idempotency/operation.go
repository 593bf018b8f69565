package idempotency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/licensor-api/licensor/internal/ptr"
)

// Operation is a guarded write, declared once: its name, how it runs as
// atomic phases (Execution), and how a pending intent of it is resumed.
// The same value serves its route (Serve), runs a call that is not a
// request (Do), and is what the reconciler resumes by its name.
type Operation[In any] struct {
	// Name names the operation in records, logs and metrics
	// ("licenses.store"). Unique among the application's operations.
	Name string
	// Subject, when set, names what an intent is about within its consumer
	// (a create: its domain). Once an intent finishes, the consumer's older
	// open intents of the operation about the same subject are superseded:
	// settled, never executed.
	Subject func(in In) string
	// Run does the work as the intent's owner, detached from the client and
	// within the work budget of the lease, through x's phases: x.Start
	// before it may reach the vendor, x.Finish to commit its local writes
	// with its answer. A 2xx answer it did not Finish is stored after it,
	// unless it says NoEffect (answered, not stored); an error that says the
	// outcome is unknown (OutcomeUnknown) keeps the intent pending; any
	// other error or status had no effect and stores nothing (the key keeps
	// its fingerprint: the same request runs again for real). What the
	// answer names (ResourceType, ResourceID, ExternalRef) is kept with the
	// record even beside an error: a pending intent is known by it.
	Run func(ctx context.Context, x *Execution, in In) (Response, error)
	// Resume finishes, for the reconciler, an intent of this operation whose
	// work may have reached the vendor (pending, or its owner died after
	// Start), from its record, through x's phases as Run does; done false:
	// nothing found yet, and mayCreate was false. Required: an intent that
	// can be pending must be finishable. An error wrapping ErrSuperseded
	// settles it as superseded, one wrapping ErrAbandon fails it for good.
	Resume func(ctx context.Context, x *Execution, rec *Record, mayCreate bool) (resp Response, done bool, err error)
	// RetryOnly says an operator may retry a failed intent of it but never
	// discard it: repeating it is always safe, and its resource waits on it
	// (a revoke's license stays revoking until the revoke ends).
	RetryOnly bool
	// BeforeDiscard, when set, runs before an operator discards an intent
	// of this operation whose work may have reached the vendor (it had
	// started): it makes sure the vendor keeps nothing for it that nobody
	// holds (a create: the domain's site, when no license holds it, is
	// deleted). An error stops the discard, and the intent stays as it was.
	BeforeDiscard func(ctx context.Context, rec *Record) error
}

// AnyOperation is an Operation of any input type, as the guard, the
// reconciler and the metrics list them. Only Operation implements it.
type AnyOperation interface {
	// OperationName is the operation's Name.
	OperationName() string
	declared() declared
}

// OperationName implements AnyOperation.
func (op Operation[In]) OperationName() string { return op.Name }

// declared is what the guard and the reconciler keep of an operation.
type declared struct {
	name          string
	ok            error // nil: the declaration can be served
	resume        func(ctx context.Context, x *Execution, rec *Record, mayCreate bool) (Response, bool, error)
	retryOnly     bool
	beforeDiscard func(ctx context.Context, rec *Record) error
}

func (op Operation[In]) declared() declared {
	d := declared{name: op.Name, resume: op.Resume, retryOnly: op.RetryOnly, beforeDiscard: op.BeforeDiscard}
	switch {
	case op.Name == "":
		d.ok = errors.New("an operation has no name")
	case op.Run == nil:
		d.ok = fmt.Errorf("operation %q has no Run", op.Name)
	case op.Resume == nil:
		d.ok = fmt.Errorf("operation %q has no Resume: a pending intent of it could never be finished", op.Name)
	}
	return d
}

// Operations is the application's one list of guarded operations: the
// guard serves only these, the reconciler resumes them by name, and the
// metrics label by their names.
type Operations struct {
	names  []string
	byName map[string]declared
}

// NewOperations checks and lists the application's operations. Every one
// needs a name no other has, a Run and a Resume; an error names the first
// that has not, so that a wiring mistake stops the process at start-up, not
// an intent an hour later.
func NewOperations(ops ...AnyOperation) (*Operations, error) {
	o := &Operations{byName: make(map[string]declared, len(ops))}
	for _, op := range ops {
		d := op.declared()
		if d.ok != nil {
			return nil, d.ok
		}
		if _, dup := o.byName[d.name]; dup {
			return nil, fmt.Errorf("operation %q is declared twice", d.name)
		}
		o.names = append(o.names, d.name)
		o.byName[d.name] = d
	}
	return o, nil
}

// Names are the operations' names, in declaration order.
func (o *Operations) Names() []string { return slices.Clone(o.names) }

// RetryOnly are the names of the operations whose intents an operator may
// retry but never discard (Operation.RetryOnly), as Store.Discard takes them.
func (o *Operations) RetryOnly() []string {
	var out []string
	for _, name := range o.names {
		if o.byName[name].retryOnly {
			out = append(out, name)
		}
	}
	return out
}

// lookup is the declaration of the operation named name.
func (o *Operations) lookup(name string) (declared, bool) {
	if o == nil {
		return declared{}, false
	}
	d, ok := o.byName[name]
	return d, ok
}

// Operations are the operations g serves.
func (g *Guard) Operations() *Operations { return g.cfg.Operations }

// MustServe panics unless op is one of g's operations: a route mounted for
// an operation the application did not declare is a wiring mistake, found
// when the routes are built, not when an intent of it waits for a resumer.
func (g *Guard) MustServe(op AnyOperation) {
	if _, ok := g.cfg.Operations.lookup(op.OperationName()); !ok {
		panic(fmt.Sprintf("idempotency: operation %q is not among the guard's operations", op.OperationName()))
	}
}

// Request is one HTTP request for an operation, in plain values: who asks,
// the route it came by (its method and pattern, which the fingerprint
// takes), its path as sent, its key ("" for none; see Guard.HeaderKey) and
// its body. The method, the path and the body are the bytes a retry repeats
// (a path's ids among them), which a replay without a parse compares; an
// empty Path is the Route.
// Prefetch, when not nil, is its record as its token row's statement read
// it; Serve uses it in place of its own first read when it was read for
// this request's scope.
type Request struct {
	Caller
	Method   string
	Route    string
	Path     string
	Key      string
	Body     []byte
	Prefetch *Prefetch
}

// Serve runs one request for op through the guard: a retry with the same
// bytes is replayed at once, the body is bound once (bind: the input, and
// the canonical form of just the fields that make the intent, its
// fingerprint; a nil intent is the whole canonical body; an error is the
// answer as it is, given before any record is made), the intent is
// reserved (or the existing record answered), Run runs as its owner and
// the record is settled. It returns the answer to write (a replay's carries
// Idempotent-Replayed), what the guard decided as log attributes for the
// request's line (nil when it decided nothing), and the error the error
// boundary answers with instead.
func (op Operation[In]) Serve(ctx context.Context, g *Guard, r Request, bind func(body []byte) (In, []byte, error)) (Response, []slog.Attr, error) {
	if r.Key != "" && !validKey(r.Key) {
		return Response{}, nil, ErrKeyInvalid
	}
	hash := bodyHash(r.Method, cmp.Or(r.Path, r.Route), r.Body)
	sc := scope{ConsumerID: r.ConsumerID, Operation: op.Name, Key: r.Key}
	var prior lookup
	if r.Key != "" {
		fast, prefetched := r.Prefetch.lookup(sc)
		if !prefetched {
			fast = g.lookup(ctx, sc) // the whole record
		}
		if fast.replayable(hash, g.now) {
			// The fast path of a retry: the same bytes as the first
			// execution, so the same intent; nothing to parse.
			resp, err := stored(fast.rec)
			return resp, g.note(fast.rec, "replayed"), err
		}
		prior = fast
		if prefetched && fast.rec != nil { // a replay's columns of a record this request does not replay: the whole of it decides
			prior = g.lookup(ctx, sc)
		}
	}
	in, intent, err := bind(r.Body)
	if err != nil {
		return Response{}, nil, err
	}
	canonical := Canonical(r.Body)
	if intent == nil {
		intent = canonical
	}
	rec := g.makeRecord(sc, Fingerprint(r.Method, r.Route, intent), canonical, r.TokenID, r.RequestID)
	rec.BodyHash = &hash
	if op.Subject != nil {
		rec.Subject = ptr.OrNil(op.Subject(in))
	}
	a := &attempt{rec: rec, prior: prior, parent: ctx, caller: r.Caller,
		work: func(ctx context.Context, x *Execution) (Response, error) { return op.Run(ctx, x, in) }}
	var resp Response
	if r.Key == "" { // the server makes the key: the intent is on the record all the same
		resp, err = g.unkeyed(a)
	} else {
		resp, _, err = g.run(a)
	}
	return resp, a.noted, err
}

// doMethod stands in a Do call's fingerprint where a request has its
// method, so that a Do intent never matches a request's under one scope.
const doMethod = "DO"

// Do runs op once for the intent key names, for work that is not an HTTP
// request (a webhook, a queue job), with Serve's guarantee and its state
// machine: the first call reserves the key and runs op.Run; a call while
// another runs gets ErrInProgress; a later one gets the stored answer with
// replayed true, and Run does not run; an error, or an answer that is not a
// 2xx, stores nothing (the key keeps its fingerprint); an unknown outcome
// keeps the intent pending (*PendingError); a record whose owner's lease ran
// out is taken over, and an expired one is a new intent. intent is what the
// work is about (the webhook's payload; nil for none), stored for Resume
// and compared in canonical form: another intent under the key is
// ErrKeyReused. key must be 1–255 visible ASCII characters (ErrKeyMissing,
// ErrKeyInvalid). When ctx is done before the call begins, nothing is done
// and ctx's error is returned.
func (op Operation[In]) Do(ctx context.Context, g *Guard, caller Caller, key string, in In, intent []byte) (resp Response, replayed bool, err error) {
	g.MustServe(op)
	return g.do(ctx, caller, scope{ConsumerID: caller.ConsumerID, Operation: op.Name, Key: key}, intent,
		func(ctx context.Context, x *Execution) (Response, error) { return op.Run(ctx, x, in) })
}

// do is Do for any work.
func (g *Guard) do(ctx context.Context, caller Caller, sc scope, intent []byte, work func(ctx context.Context, x *Execution) (Response, error)) (Response, bool, error) {
	switch {
	case sc.Key == "":
		return Response{}, false, ErrKeyMissing
	case !validKey(sc.Key):
		return Response{}, false, ErrKeyInvalid
	}
	if err := ctx.Err(); err != nil {
		return Response{}, false, err
	}
	canonical := Canonical(intent)
	rec := g.makeRecord(sc, Fingerprint(doMethod, sc.Operation, canonical), canonical, "", "") // no request to correlate
	return g.run(&attempt{rec: rec, parent: ctx, caller: caller,
		work: func(ctx context.Context, x *Execution) (Response, error) {
			resp, err := work(ctx, x)
			if resp.Status == 0 && err == nil {
				resp.Status = http.StatusOK
			}
			return resp, err
		}})
}
