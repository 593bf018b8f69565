package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/resource"
)

// intentsCmd is `licensor intents list|show|retry|discard|events|digest`:
// the operator's view of the idempotency records. It never shows a raw
// key, a token or a stored body: idempotency.Intent carries none of them.
// A retry and a discard are in the audit trail with the actor console.
func intentsCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "intents", "The operator's view of intents (idempotency records) in the configured database.", []subcommand{
		{"list", "list intents: --status, --consumer NAME, --older-than D, --page, --per-page, --json", intentsList},
		{"show", "show one intent by its id (--json)", intentsShow},
		{"retry", "put a failed intent back to pending, its attempts reset", intentsRetry},
		{"discard", "settle a failed or abandoned intent for good: ID --reason TEXT (required); a retry with its key is refused until it expires", intentsDiscard},
		{"events", "list an intent's audit trail (retried, discarded with the reason), oldest first (--json)", intentsEvents},
		{"digest", "print the key_digest of an Idempotency-Key, as logs and intents show it", intentsDigest},
	})
}

// listOptions are the flags of `licensor intents list`.
type listOptions struct {
	status, consumer string
	olderThan        time.Duration
	page, perPage    int
	json             bool
}

// intentsList prints one page of intents, oldest first, as a table or as
// a JSON array; the page line goes to stderr.
func intentsList(ctx context.Context, e env) error {
	o, ok, err := parseListOptions(e)
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		f := idempotency.IntentFilter{Status: o.status, Page: o.page, PerPage: o.perPage}
		if o.olderThan > 0 {
			f.Before = b.now().UTC().Add(-o.olderThan)
		}
		intents, names, total, err := findIntents(ctx, e, b, f, o.consumer)
		if err != nil {
			return err
		}
		if err := writeList(e.stdout, o.json, intentColumns, resource.NewIntents(intents, names)); err != nil {
			return err
		}
		lastPage := max(1, (total+int64(o.perPage)-1)/int64(o.perPage))
		fmt.Fprintf(e.stderr, "page %d of %d (%d in all)\n", o.page, lastPage, total)
		return nil
	})
}

// parseListOptions parses and checks list's flags; ok is false when the
// command should stop there (help printed, or err).
func parseListOptions(e env) (listOptions, bool, error) {
	var o listOptions
	fs := flag.NewFlagSet("intents list", flag.ContinueOnError)
	fs.StringVar(&o.status, "status", "", "only intents in this status: "+strings.Join(idempotency.Statuses, ", "))
	fs.StringVar(&o.consumer, "consumer", "", "only this consumer's intents, by name")
	fs.DurationVar(&o.olderThan, "older-than", 0, "only intents created more than this long ago, e.g. 10m")
	fs.IntVar(&o.page, "page", 1, "the page, from 1")
	fs.IntVar(&o.perPage, "per-page", 50, "intents per page, 1 to 100")
	fs.BoolVar(&o.json, "json", false, "print a JSON array instead of a table")
	setUsage(fs, "intents list [flags]", "Lists intents (idempotency records), oldest first, as a table or a JSON array; the page line goes to stderr.")
	if ok, err := parseFlags(fs, e); !ok {
		return o, false, err
	}
	switch {
	case fs.NArg() > 0:
		return o, false, usagef("intents list: unexpected argument %q (flags only)", fs.Arg(0))
	case o.status != "" && !slices.Contains(idempotency.Statuses, o.status):
		return o, false, usagef("intents list: unknown --status %q (%s)", o.status, strings.Join(idempotency.Statuses, ", "))
	case o.olderThan < 0:
		return o, false, usagef("intents list: --older-than must not be negative")
	case o.page < 1:
		return o, false, usagef("intents list: --page must be 1 or more")
	case o.perPage < 1 || o.perPage > 100:
		return o, false, usagef("intents list: --per-page must be between 1 and 100")
	}
	return o, true, nil
}

// findIntents lists the intents f selects, of the consumer named consumer
// when it is not empty (an unknown name selects none), with their
// consumers' names (consumer id → name).
func findIntents(ctx context.Context, e env, b *Base, f idempotency.IntentFilter, consumer string) ([]idempotency.Intent, map[string]string, int64, error) {
	if consumer != "" {
		id, found, err := consumerID(ctx, e, b, consumer)
		if !found {
			return nil, map[string]string{}, 0, err
		}
		f.ConsumerID = id
	}
	intents, total, err := b.Store.Intents(ctx, f)
	if err != nil {
		return nil, nil, 0, err
	}
	ids := make([]string, len(intents))
	for i, in := range intents {
		ids[i] = in.ConsumerID
	}
	names, err := consumerNames(ctx, b.Auth, ids...)
	return intents, names, total, err
}

// consumerID is the id of the consumer named name; found is false when
// there is none (said on stderr: the list is empty) or on err.
func consumerID(ctx context.Context, e env, b *Base, name string) (id string, found bool, err error) {
	c, err := b.Auth.ConsumerNamed(ctx, name)
	if errors.Is(err, auth.ErrConsumerNotFound) {
		fmt.Fprintf(e.stderr, "no consumer is named %q\n", name)
		return "", false, nil
	}
	return c.ID, err == nil, err
}

// intentsShow prints one intent, a field a line, or as a JSON object.
func intentsShow(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON object instead of a field a line")
	setUsage(fs, "intents show ID [--json]", "Shows one intent: its status, operation, consumer and outcome, never its key or bodies.")
	id, ok, err := intentID(fs, e, "intents show")
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		in, err := b.Store.Intent(ctx, "", id)
		if err != nil {
			return intentError("show", id, err)
		}
		return printIntent(ctx, e, b, in, *asJSON)
	})
}

// printIntent prints in as `intents show` does: a field a line, or as the
// API's JSON object.
func printIntent(ctx context.Context, e env, b *Base, in idempotency.Intent, asJSON bool) error {
	names, err := consumerNames(ctx, b.Auth, in.ConsumerID)
	if err != nil {
		return err
	}
	v := resource.NewIntent(in, names[in.ConsumerID])
	if asJSON {
		return writeJSON(e.stdout, v)
	}
	return writeRecord(e.stdout, intentFields, v)
}

// intentsRetry puts a failed intent back to pending, its attempts reset,
// for the reconciler's next pass.
func intentsRetry(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents retry", flag.ContinueOnError)
	setUsage(fs, "intents retry ID", "Puts a failed intent back to pending, its attempts reset.")
	id, ok, err := intentID(fs, e, "intents retry")
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		in, err := b.Store.RetryFailed(ctx, audit.Console(), id, b.now().UTC())
		if errors.Is(err, idempotency.ErrNotFailed) {
			return fmt.Errorf("retry %s: the intent is %s, not failed: %w", id, in.Status, err)
		}
		if err != nil {
			return intentError("retry", id, err)
		}
		fmt.Fprintf(e.stderr, "intent %s (%s) is pending again, attempts reset; the reconciler picks it up on its next pass\n",
			in.ID, in.Operation)
		return nil
	})
}

// intentsDiscard settles a failed or abandoned intent for good, with the
// operator's reason in the audit trail, and prints it as `intents show`
// does. An intent in another status is refused as `intents retry` refuses
// one that is not failed (exit 1); a missing or invalid --reason is a
// usage error (exit 2).
func intentsDiscard(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents discard", flag.ContinueOnError)
	reason := fs.String("reason", "", "why, for the audit trail (required; 1 to 500 characters); never shown to the consumer")
	asJSON := fs.Bool("json", false, "print the intent as a JSON object instead of a field a line")
	setUsage(fs, "intents discard ID --reason TEXT [--json]",
		"Settles a failed or abandoned intent for good: it becomes discarded and is never run again; a client's retry with its key is "+
			"answered 409 intent_discarded until IDEMPOTENCY_TTL has passed. A create whose call may have reached the vendor is cleared there "+
			"first: a site for its domain that no license holds is deleted; when the vendor cannot be asked, nothing changes (exit 1). "+
			"Needs the server's vendor settings. The reason goes to the audit trail (`licensor intents events ID`).")
	id, ok, err := intentID(fs, e, "intents discard")
	if !ok {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("intents discard: --reason is required: say why, for the audit trail")
	}
	a, err := loadApp(ctx, e, false) // the vendor too (the database's own driver): a create that may have reached it is cleared there first
	if err != nil {
		return err
	}
	return errors.Join(func(b *Base) error {
		in, err := a.Guard.Discard(ctx, audit.Console(), id, *reason)
		var invalid *audit.ValidationError
		var unavailable *licenses.UnavailableError
		switch {
		case errors.As(err, &invalid):
			return usagef("intents discard: --reason: %s", strings.Join(invalid.Fields["reason"], " "))
		case errors.Is(err, idempotency.ErrRetryOnly):
			return fmt.Errorf("discard %s: a %s intent is retried, never discarded (its license waits on it): licensor intents retry %s: %w", id, in.Operation, id, err)
		case errors.Is(err, idempotency.ErrNotDiscardable):
			return fmt.Errorf("discard %s: the intent is %s, not failed or abandoned: %w", id, in.Status, err)
		case errors.As(err, &unavailable):
			return fmt.Errorf("discard %s: the vendor could not be asked whether it keeps a site for the intent; nothing changed, try again later: %w", id, err)
		case err != nil:
			return intentError("discard", id, err)
		}
		fmt.Fprintf(e.stderr, "intent %s (%s) is discarded: never run again; a retry with its key is refused until it expires\n", in.ID, in.Operation)
		return printIntent(ctx, e, b, in, *asJSON)
	}(a.Base), a.Close())
}

// intentsEvents prints an intent's audit trail, oldest first, as a table
// or as the JSON array of the API's objects.
func intentsEvents(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents events", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	setUsage(fs, "intents events ID [--json]", "Lists an intent's audit trail, oldest first: each attempt of the reconciler (what came of it), each retry and discard (with its reason), by which token (console: the command line).")
	id, ok, err := intentID(fs, e, "intents events")
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		events, consumerID, err := b.Store.IntentEvents(ctx, id)
		if err != nil {
			return intentError("events of", id, err)
		}
		ids := []string{consumerID}
		for _, ev := range events {
			if ev.ActorConsumerID != nil {
				ids = append(ids, *ev.ActorConsumerID)
			}
		}
		names, err := b.Auth.ConsumerNames(ctx, ids)
		if err != nil {
			return err
		}
		return writeList(e.stdout, *asJSON, intentEventColumns, resource.NewIntentEvents(events, names[consumerID], names))
	})
}

// intentsDigest prints the key_digest logs and intents show for a raw
// Idempotency-Key a consumer gives (an HMAC under APP_KEY, so it must run
// with the server's APP_KEY), to find its request.
func intentsDigest(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents digest", flag.ContinueOnError)
	setUsage(fs, "intents digest KEY", "Prints the key_digest of an Idempotency-Key (or a license id, for its revoke), as logs and intents show it.")
	key, ok, err := oneArg(fs, e, "intents digest", intentArg)
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		fmt.Fprintln(e.stdout, b.Store.KeyDigest(key))
		return nil
	})
}

// intentError adds the way to find an id to a not-found error.
func intentError(verb, id string, err error) error {
	if errors.Is(err, idempotency.ErrIntentNotFound) {
		return fmt.Errorf("%s %s: %w (see `licensor intents list`)", verb, id, err)
	}
	return err
}

// intentArg is what an intents subcommand's one argument is, as its usage
// error says.
const intentArg = "intent ID (see `licensor intents list`)"

// intentID is idArg for the subcommands that take an intent's id.
func intentID(fs *flag.FlagSet, e env, name string) (string, bool, error) {
	return idArg(fs, e, name, intentArg, fmt.Errorf("%w (see `licensor intents list`)", idempotency.ErrIntentNotFound))
}

// withBase opens the Base (the migrated database, no vendor) and runs
// fn with it.
func withBase(ctx context.Context, e env, fn func(*Base) error) error {
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	return errors.Join(fn(b), b.Close())
}

// consumerNames are the names of the consumers ids name, by id.
func consumerNames(ctx context.Context, svc *auth.Service, ids ...string) (map[string]string, error) {
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	return svc.ConsumerNames(ctx, ids)
}

// intentColumns are the table of `intents list`: the resource's fields, the
// times in RFC 3339 to the second, "-" for an empty one; KEY is the digest,
// marked when the server made the key.
var intentColumns = []column[resource.Intent]{
	{"ID", func(v resource.Intent) string { return v.ID }},
	{"CONSUMER", func(v resource.Intent) string { return orNone(v.Consumer) }},
	{"OPERATION", func(v resource.Intent) string { return v.Operation.Operation }},
	{"STATUS", func(v resource.Intent) string { return v.Status }},
	{"ATTEMPTS", func(v resource.Intent) string { return strconv.Itoa(v.Attempts) }},
	{"KEY", func(v resource.Intent) string {
		if v.KeySource == resource.KeySourceServer {
			return v.KeyDigest + " (server)"
		}
		return v.KeyDigest
	}},
	{"REF", func(v resource.Intent) string { return orNone(v.ExternalRef) }},
	{"NEXT ATTEMPT", func(v resource.Intent) string { return when(v.NextAttemptAt) }},
	{"CREATED", func(v resource.Intent) string { return when(v.CreatedAt) }},
	{"UPDATED", func(v resource.Intent) string { return when(v.UpdatedAt) }},
}

// intentFields are `intents show`'s lines: every field of the resource, in
// order, named as in its JSON, the times as in the table.
var intentFields = []column[resource.Intent]{
	{"id", func(v resource.Intent) string { return v.ID }},
	{"consumer", func(v resource.Intent) string { return orNone(v.Consumer) }},
	{"consumer_id", func(v resource.Intent) string { return orNone(v.ConsumerID) }},
	{"operation", func(v resource.Intent) string { return v.Operation.Operation }},
	{"status", func(v resource.Intent) string { return v.Status }},
	{"attempts", func(v resource.Intent) string { return strconv.Itoa(v.Attempts) }},
	{"key_digest", func(v resource.Intent) string { return v.KeyDigest }},
	{"key_source", func(v resource.Intent) string { return v.KeySource }},
	{"external_ref", func(v resource.Intent) string { return orNone(v.ExternalRef) }},
	{"resource_type", func(v resource.Intent) string { return orNone(v.ResourceType) }},
	{"resource_id", func(v resource.Intent) string { return orNone(v.ResourceID) }},
	{"request_id", func(v resource.Intent) string { return orNone(v.RequestID) }},
	{"token_id", func(v resource.Intent) string { return orNone(v.TokenID) }},
	{"next_attempt_at", func(v resource.Intent) string { return when(v.NextAttemptAt) }},
	{"created_at", func(v resource.Intent) string { return when(v.CreatedAt) }},
	{"updated_at", func(v resource.Intent) string { return when(v.UpdatedAt) }},
	{"result", func(v resource.Intent) string {
		if v.Result == nil {
			return "-"
		}
		return strings.TrimSpace(strconv.Itoa(v.Result.Status) + " " + v.Result.Location)
	}},
}

// intentEventColumns are the table of `intents events`; a reason is quoted,
// as anyone's text.
var intentEventColumns = []column[resource.IntentEvent]{
	{"ID", func(v resource.IntentEvent) string { return strconv.FormatUint(v.ID, 10) }},
	{"EVENT", func(v resource.IntentEvent) string { return v.Event }},
	{"ACTOR", func(v resource.IntentEvent) string { return v.Actor }},
	{"ACTOR TOKEN", func(v resource.IntentEvent) string { return orNone(v.ActorTokenID) }},
	{"ACTOR CONSUMER", func(v resource.IntentEvent) string { return orNone(v.ActorConsumer) }},
	{"REQUEST", func(v resource.IntentEvent) string { return orNone(v.RequestID) }},
	{"CREATED", func(v resource.IntentEvent) string { return when(v.CreatedAt) }},
	{"REASON", func(v resource.IntentEvent) string { return quoted(v.Reason) }},
}
