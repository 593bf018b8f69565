package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/app/webhooks"
)

// webhooksCmd is `licensor webhooks list|deliveries|retry`: the operator's
// view of the consumers' webhook endpoints and what was sent to them. It
// never shows an endpoint's secret or an event's body. A retry is in the
// audit trail with the actor console.
func webhooksCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "webhooks", "The operator's view of the consumers' webhook endpoints and their deliveries.", []subcommand{
		{"list", "list the webhook endpoints, oldest first: --consumer NAME, --json", webhooksList},
		{"deliveries", "list an endpoint's deliveries, newest first, with their attempts: ENDPOINT_ID --status, --json", webhooksDeliveries},
		{"retry", "make a delivery due now with a new retry window: DELIVERY_ID", webhooksRetry},
	})
}

// webhooksList prints the endpoints (of one consumer, by name), as a table
// or a JSON array.
func webhooksList(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("webhooks list", flag.ContinueOnError)
	consumer := fs.String("consumer", "", "only this consumer's endpoints, by name")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	setUsage(fs, "webhooks list [--consumer NAME] [--json]", "Lists the webhook endpoints, oldest first: enabled or disabled (and why), failing since when; never a secret.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("webhooks list: unexpected argument %q (flags only)", fs.Arg(0))
	}
	return withBase(ctx, e, func(b *Base) error {
		id := ""
		if *consumer != "" {
			cid, found, err := consumerID(ctx, e, b, *consumer)
			if !found {
				if err != nil {
					return err
				}
				return writeList(e.stdout, *asJSON, endpointColumns, resource.NewConsumerWebhookEndpoints(nil, nil))
			}
			id = cid
		}
		eps, err := b.Webhooks.ListEndpoints(ctx, id)
		if err != nil {
			return err
		}
		ids := make([]string, len(eps))
		for i, ep := range eps {
			ids[i] = ep.ConsumerID
		}
		names, err := consumerNames(ctx, b.Auth, ids...)
		if err != nil {
			return err
		}
		return writeList(e.stdout, *asJSON, endpointColumns, resource.NewConsumerWebhookEndpoints(eps, names))
	})
}

// endpointColumns are the table of `webhooks list`: never a secret; the
// URL and the reason are quoted, as anyone's text.
var endpointColumns = []column[resource.ConsumerWebhookEndpoint]{
	{"ID", func(v resource.ConsumerWebhookEndpoint) string { return v.ID }},
	{"CONSUMER", func(v resource.ConsumerWebhookEndpoint) string { return orNone(v.Consumer) }},
	{"URL", func(v resource.ConsumerWebhookEndpoint) string { return strconv.Quote(v.URL) }},
	{"EVENTS", func(v resource.ConsumerWebhookEndpoint) string { return strings.Join(v.Events, ",") }},
	{"ENABLED", func(v resource.ConsumerWebhookEndpoint) string { return strconv.FormatBool(v.Enabled) }},
	{"FAILING SINCE", func(v resource.ConsumerWebhookEndpoint) string { return when(v.FailingSince) }},
	{"DISABLED", func(v resource.ConsumerWebhookEndpoint) string { return when(v.DisabledAt) }},
	{"REASON", func(v resource.ConsumerWebhookEndpoint) string { return quoted(v.DisabledReason) }},
}

// webhooksDeliveries prints an endpoint's deliveries, newest first, as a
// table (the last attempt of each) or a JSON array (every attempt).
func webhooksDeliveries(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("webhooks deliveries", flag.ContinueOnError)
	status := fs.String("status", "", "only deliveries in this status: "+strings.Join(webhooks.Statuses, ", "))
	perPage := fs.Int("limit", 50, "at most this many, 1 to 1000")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	setUsage(fs, "webhooks deliveries ENDPOINT_ID [--status pending|delivered|failed] [--limit N] [--json]",
		"Lists an endpoint's deliveries, newest first, with their attempts (answer status, duration, why it failed); never a body.")
	id, ok, err := idArg(fs, e, "webhooks deliveries", "endpoint ID (see `licensor webhooks list`)", webhooks.ErrNotFound)
	if !ok {
		return err
	}
	switch {
	case *status != "" && !slices.Contains(webhooks.Statuses, *status):
		return usagef("webhooks deliveries: unknown --status %q (%s)", *status, strings.Join(webhooks.Statuses, ", "))
	case *perPage < 1 || *perPage > 1000:
		return usagef("webhooks deliveries: --limit must be between 1 and 1000")
	}
	return withBase(ctx, e, func(b *Base) error {
		if _, err := b.Webhooks.GetEndpoint(ctx, "", id); err != nil {
			return webhookError("deliveries of", id, "licensor webhooks list", err)
		}
		p, err := b.Webhooks.Deliveries(ctx, webhooks.DeliveryQuery{EndpointID: id, Status: *status, PerPage: *perPage})
		if err != nil {
			return err
		}
		if err := writeList(e.stdout, *asJSON, deliveryColumns, resource.NewWebhookDeliveries(p.Deliveries)); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%d of %d shown\n", len(p.Deliveries), p.Total)
		return nil
	})
}

// deliveryColumns are the table of `webhooks deliveries`: the last attempt
// of each (--json has them all); never a body.
var deliveryColumns = []column[resource.WebhookDelivery]{
	{"ID", func(d resource.WebhookDelivery) string { return d.ID }},
	{"EVENT", func(d resource.WebhookDelivery) string { return d.EventID }},
	{"TYPE", func(d resource.WebhookDelivery) string { return d.EventType }},
	{"STATUS", func(d resource.WebhookDelivery) string { return d.Status }},
	{"ATTEMPTS", func(d resource.WebhookDelivery) string { return strconv.Itoa(len(d.Attempts)) }},
	{"LAST ANSWER", func(d resource.WebhookDelivery) string {
		if a := d.LastAttempt(); a != nil && a.ResponseStatus != nil {
			return strconv.Itoa(*a.ResponseStatus)
		}
		return "-"
	}},
	{"LAST ERROR", func(d resource.WebhookDelivery) string {
		if a := d.LastAttempt(); a != nil {
			return quoted(a.Error)
		}
		return "-"
	}},
	{"NEXT ATTEMPT", func(d resource.WebhookDelivery) string { return when(d.NextAttemptAt) }},
	{"CREATED", func(d resource.WebhookDelivery) string { return when(d.CreatedAt) }},
}

// webhooksRetry makes a delivery due now, with a new retry window, and
// records it in the audit trail.
func webhooksRetry(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("webhooks retry", flag.ContinueOnError)
	setUsage(fs, "webhooks retry DELIVERY_ID",
		"Makes a delivery due now with a new WEBHOOK_RETRY_FOR window: a failed one is retried, a delivered one sent again (the receiver drops a duplicate by the event's id). Recorded in the audit trail.")
	id, ok, err := idArg(fs, e, "webhooks retry", "delivery ID (see `licensor webhooks deliveries ENDPOINT_ID`)", webhooks.ErrNotFound)
	if !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		d, err := b.Webhooks.RetryDelivery(ctx, audit.Console(), "", "", id)
		if errors.Is(err, webhooks.ErrInFlight) {
			return fmt.Errorf("retry %s: a worker is sending it now; its attempt decides: %w", id, err)
		}
		if err != nil {
			return webhookError("retry", id, "licensor webhooks deliveries ENDPOINT_ID", err)
		}
		fmt.Fprintf(e.stderr, "delivery %s (%s to endpoint %s) is due now; a serve's worker sends it within WEBHOOK_POLL_INTERVAL\n",
			d.ID, d.EventType, d.EndpointID)
		return nil
	})
}

// webhookError adds the way to find an id to a not-found error.
func webhookError(verb, id, find string, err error) error {
	if errors.Is(err, webhooks.ErrNotFound) {
		return fmt.Errorf("%s %s: %w (see `%s`)", verb, id, err, find)
	}
	return err
}

// oneArg parses a subcommand that takes one argument (what: an id, or a
// key) and flags, on either side of it; ok is false when the command should
// stop there.
func oneArg(fs *flag.FlagSet, e env, name, what string) (string, bool, error) {
	var args []string
	for {
		if ok, err := parseFlags(fs, e); !ok {
			return "", false, err
		}
		if fs.NArg() == 0 {
			break
		}
		args = append(args, fs.Arg(0))
		e.args = fs.Args()[1:]
	}
	if len(args) != 1 {
		return "", false, usagef("%s: give exactly one %s", name, what)
	}
	return args[0], true, nil
}

// idArg is oneArg for a subcommand that takes an id: one that cannot exist
// is notFound, without asking the database (on MariaDB such text compared
// with an id's ASCII column is an error, not a miss).
func idArg(fs *flag.FlagSet, e env, name, what string, notFound error) (string, bool, error) {
	id, ok, err := oneArg(fs, e, name, what)
	if ok && !request.IsID(id) {
		return "", false, fmt.Errorf("%s %q: %w", name, id, notFound)
	}
	return id, ok, err
}
