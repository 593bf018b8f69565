package console

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
)

// intentStatuses are the statuses --status accepts, in an intent's order.
var intentStatuses = []string{idempotency.StatusPending, idempotency.StatusProcessing,
	idempotency.StatusCompleted, idempotency.StatusFailed}

// intentsCmd is `licensor intents list|show|retry|digest`: the operator's view of
// the idempotency records. It never shows a raw key, a token or a stored
// body: idempotency.Intent carries none of them.
func intentsCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "intents", "The operator's view of intents (idempotency records) in the configured database.", []subcommand{
		{"list", "list intents: --status, --consumer NAME, --older-than D, --page, --per-page, --json", intentsList},
		{"show", "show one intent by its id (--json)", intentsShow},
		{"retry", "put a failed intent back to pending, its attempts reset", intentsRetry},
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
	return withIntents(ctx, e, func(b *Base) error {
		f := idempotency.IntentFilter{Status: o.status, Page: o.page, PerPage: o.perPage}
		if o.olderThan > 0 {
			f.Before = b.now().UTC().Add(-o.olderThan)
		}
		views, total, err := findIntents(ctx, e, b, f, o.consumer)
		if err != nil {
			return err
		}
		if err := writeIntents(e.stdout, views, o.json); err != nil {
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
	fs.StringVar(&o.status, "status", "", "only intents in this status: "+strings.Join(intentStatuses, ", "))
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
	case o.status != "" && !slices.Contains(intentStatuses, o.status):
		return o, false, usagef("intents list: unknown --status %q (%s)", o.status, strings.Join(intentStatuses, ", "))
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
// consumers' names.
func findIntents(ctx context.Context, e env, b *Base, f idempotency.IntentFilter, consumer string) ([]intentView, int64, error) {
	if consumer != "" {
		c, err := b.Auth.ConsumerNamed(ctx, consumer)
		if errors.Is(err, auth.ErrConsumerNotFound) {
			fmt.Fprintf(e.stderr, "no consumer is named %q\n", consumer)
			return []intentView{}, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		f.ConsumerID = c.ID
	}
	intents, total, err := b.Store.Intents(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	views, err := viewsOf(ctx, b.Auth, intents)
	return views, total, err
}

// intentsShow prints one intent, a field a line, or as a JSON object.
func intentsShow(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON object instead of a field a line")
	setUsage(fs, "intents show ID [--json]", "Shows one intent: its status, operation, consumer and outcome, never its key or bodies.")
	id, ok, err := oneID(fs, e, "intents show")
	if !ok {
		return err
	}
	return withIntents(ctx, e, func(b *Base) error {
		in, err := b.Store.Intent(ctx, "", id)
		if err != nil {
			return intentError("show", id, err)
		}
		views, err := viewsOf(ctx, b.Auth, []idempotency.Intent{in})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(e.stdout, views[0])
		}
		return views[0].writeFields(e.stdout)
	})
}

// intentsRetry puts a failed intent back to pending, its attempts reset,
// for the reconciler's next pass.
func intentsRetry(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents retry", flag.ContinueOnError)
	setUsage(fs, "intents retry ID", "Puts a failed intent back to pending, its attempts reset.")
	id, ok, err := oneID(fs, e, "intents retry")
	if !ok {
		return err
	}
	return withIntents(ctx, e, func(b *Base) error {
		in, err := b.Store.RetryFailed(ctx, id, b.now().UTC())
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

// intentsDigest prints the key_digest logs and intents show for a raw
// Idempotency-Key a consumer gives (an HMAC under APP_KEY, so it must run
// with the server's APP_KEY), to find its request.
func intentsDigest(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("intents digest", flag.ContinueOnError)
	setUsage(fs, "intents digest KEY", "Prints the key_digest of an Idempotency-Key (or a license id, for its revoke), as logs and intents show it.")
	key, ok, err := oneID(fs, e, "intents digest")
	if !ok {
		return err
	}
	return withIntents(ctx, e, func(b *Base) error {
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

// oneID parses a subcommand that takes one intent id and flags, on either
// side of it; ok is false when the command should stop there.
func oneID(fs *flag.FlagSet, e env, name string) (string, bool, error) {
	var ids []string
	for {
		if ok, err := parseFlags(fs, e); !ok {
			return "", false, err
		}
		if fs.NArg() == 0 {
			break
		}
		ids = append(ids, fs.Arg(0))
		e.args = fs.Args()[1:]
	}
	if len(ids) != 1 {
		return "", false, usagef("%s: give exactly one intent ID (see `licensor intents list`)", name)
	}
	return ids[0], true, nil
}

// withIntents opens the Base (the migrated database, no vendor) and runs
// fn with it.
func withIntents(ctx context.Context, e env, fn func(*Base) error) error {
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	return errors.Join(fn(b), b.Close())
}

// intentView is an intent as an operator sees it, in the fields and names
// of GET /api/intents: a digest of the key, never the key, a token or a
// stored body. A nil pointer is a field that is empty.
type intentView struct {
	ID            string      `json:"id"`
	Consumer      *string     `json:"consumer"`
	ConsumerID    string      `json:"consumer_id"`
	Operation     string      `json:"operation"`
	Status        string      `json:"status"`
	Attempts      int         `json:"attempts"`
	KeyDigest     string      `json:"key_digest"`
	KeySource     string      `json:"key_source"` // "client", or "server" when the request came without a key
	ExternalRef   *string     `json:"external_ref"`
	ResourceType  *string     `json:"resource_type"`
	ResourceID    *string     `json:"resource_id"`
	RequestID     *string     `json:"request_id"`
	TokenID       *string     `json:"token_id"`
	NextAttemptAt *string     `json:"next_attempt_at"`
	CreatedAt     string      `json:"created_at"`
	UpdatedAt     string      `json:"updated_at"`
	Result        *resultView `json:"result"`
}

// resultView is what a completed intent answered.
type resultView struct {
	Status   int     `json:"status"`
	Location *string `json:"location"`
}

// viewsOf builds the views of intents, with their consumers' names.
func viewsOf(ctx context.Context, svc *auth.Service, intents []idempotency.Intent) ([]intentView, error) {
	views := make([]intentView, 0, len(intents))
	if len(intents) == 0 {
		return views, nil
	}
	ids := make([]string, 0, len(intents))
	for _, in := range intents {
		ids = append(ids, in.ConsumerID)
	}
	names, err := svc.ConsumerNames(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, in := range intents {
		views = append(views, newIntentView(in, names[in.ConsumerID]))
	}
	return views, nil
}

// newIntentView is the view of one intent of the consumer named consumer.
func newIntentView(in idempotency.Intent, consumer string) intentView {
	v := intentView{
		ID: in.ID, Consumer: nonEmpty(consumer), ConsumerID: in.ConsumerID, Operation: in.Operation,
		Status: in.Status, Attempts: in.Attempts, KeyDigest: in.KeyDigest, KeySource: "client",
		ExternalRef: nonEmpty(in.ExternalRef), ResourceType: nonEmpty(in.ResourceType),
		ResourceID: nonEmpty(in.ResourceID), RequestID: nonEmpty(in.CorrelationID),
		TokenID: nonEmpty(in.RequestedBy), NextAttemptAt: nonEmpty(rfc3339(in.NextAttemptAt)),
		CreatedAt: rfc3339(&in.CreatedAt), UpdatedAt: rfc3339(&in.UpdatedAt),
	}
	if in.Auto {
		v.KeySource = "server"
	}
	if in.Result != nil {
		v.Result = &resultView{Status: in.Result.Status, Location: nonEmpty(in.Result.Location)}
	}
	return v
}

// key is the KEY column: the digest, marked when the server made the key.
func (v intentView) key() string {
	if v.KeySource == "server" {
		return v.KeyDigest + " (server)"
	}
	return v.KeyDigest
}

// fields are the view's fields in order, named as in its JSON, "-" for
// an empty one.
func (v intentView) fields() [][2]string {
	result := "-"
	if v.Result != nil {
		result = strconv.Itoa(v.Result.Status)
		if v.Result.Location != nil {
			result += " " + *v.Result.Location
		}
	}
	return [][2]string{
		{"id", v.ID}, {"consumer", orNone(v.Consumer)}, {"consumer_id", v.ConsumerID},
		{"operation", v.Operation}, {"status", v.Status}, {"attempts", strconv.Itoa(v.Attempts)},
		{"key_digest", v.KeyDigest}, {"key_source", v.KeySource}, {"external_ref", orNone(v.ExternalRef)},
		{"resource_type", orNone(v.ResourceType)}, {"resource_id", orNone(v.ResourceID)},
		{"request_id", orNone(v.RequestID)}, {"token_id", orNone(v.TokenID)},
		{"next_attempt_at", orNone(v.NextAttemptAt)}, {"created_at", v.CreatedAt},
		{"updated_at", v.UpdatedAt}, {"result", result},
	}
}

// writeFields prints the view a field a line.
func (v intentView) writeFields(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range v.fields() {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	return tw.Flush()
}

// writeIntents prints the views as a JSON array or as a table.
func writeIntents(w io.Writer, views []intentView, asJSON bool) error {
	if asJSON {
		return writeJSON(w, views)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONSUMER\tOPERATION\tSTATUS\tATTEMPTS\tKEY\tREF\tNEXT ATTEMPT\tCREATED\tUPDATED")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.ID, orNone(v.Consumer), v.Operation,
			v.Status, v.Attempts, v.key(), orNone(v.ExternalRef), orNone(v.NextAttemptAt), v.CreatedAt, v.UpdatedAt)
	}
	return tw.Flush()
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rfc3339 is t in RFC 3339, UTC, "" for none.
func rfc3339(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// nonEmpty is s, nil when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orNone is *s, "-" when it is nil.
func orNone(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
