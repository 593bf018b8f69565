package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
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

// endpointView is an endpoint as `webhooks list --json` prints it: the
// API's object, with its consumer and its failing streak.
type endpointView struct {
	webhooks.EndpointResource
	ConsumerID   string  `json:"consumer_id"`
	Consumer     *string `json:"consumer"`
	FailingSince *string `json:"failing_since"`
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
	return withIntents(ctx, e, func(b *Base) error {
		consumerID := ""
		if *consumer != "" {
			c, err := b.Auth.ConsumerNamed(ctx, *consumer)
			if errors.Is(err, auth.ErrConsumerNotFound) {
				fmt.Fprintf(e.stderr, "no consumer is named %q\n", *consumer)
				return writeEndpoints(e.stdout, nil, nil, *asJSON)
			}
			if err != nil {
				return err
			}
			consumerID = c.ID
		}
		eps, err := b.Webhooks.ListEndpoints(ctx, consumerID)
		if err != nil {
			return err
		}
		ids := make([]string, len(eps))
		for i, ep := range eps {
			ids[i] = ep.ConsumerID
		}
		names := map[string]string{}
		if len(ids) > 0 {
			if names, err = b.Auth.ConsumerNames(ctx, ids); err != nil {
				return err
			}
		}
		return writeEndpoints(e.stdout, eps, names, *asJSON)
	})
}

func writeEndpoints(w io.Writer, eps []webhooks.Endpoint, names map[string]string, asJSON bool) error {
	views := make([]endpointView, len(eps))
	for i, ep := range eps {
		views[i] = endpointView{EndpointResource: ep.Resource(), ConsumerID: ep.ConsumerID}
		if n, ok := names[ep.ConsumerID]; ok {
			views[i].Consumer = &n
		}
		if ep.FailingSince != nil {
			s := events.Time(*ep.FailingSince)
			views[i].FailingSince = &s
		}
	}
	if asJSON {
		return writeJSON(w, views)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONSUMER\tURL\tEVENTS\tENABLED\tFAILING SINCE\tDISABLED\tREASON")
	for i, v := range views {
		reason := "-"
		if v.DisabledReason != nil {
			reason = strconv.Quote(*v.DisabledReason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", v.ID, orNone(v.Consumer), strconv.Quote(v.URL), strings.Join(v.Events, ","),
			v.Enabled, humanTime(eps[i].FailingSince), humanTime(eps[i].DisabledAt), reason)
	}
	return tw.Flush()
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
	id, ok, err := oneArg(fs, e, "webhooks deliveries", "endpoint ID (see `licensor webhooks list`)")
	if !ok {
		return err
	}
	switch {
	case *status != "" && !slices.Contains(webhooks.Statuses, *status):
		return usagef("webhooks deliveries: unknown --status %q (%s)", *status, strings.Join(webhooks.Statuses, ", "))
	case *perPage < 1 || *perPage > 1000:
		return usagef("webhooks deliveries: --limit must be between 1 and 1000")
	}
	return withIntents(ctx, e, func(b *Base) error {
		if _, err := b.Webhooks.GetEndpoint(ctx, "", id); err != nil {
			return webhookError("deliveries of", id, "licensor webhooks list", err)
		}
		p, err := b.Webhooks.Deliveries(ctx, webhooks.DeliveryQuery{EndpointID: id, Status: *status, PerPage: *perPage})
		if err != nil {
			return err
		}
		if err := writeDeliveries(e.stdout, p.Deliveries, *asJSON); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%d of %d shown\n", len(p.Deliveries), p.Total)
		return nil
	})
}

// writeDeliveries prints the deliveries: --json as the API shows them
// (resource.WebhookDelivery), else a table.
func writeDeliveries(w io.Writer, ds []webhooks.DeliveryView, asJSON bool) error {
	if asJSON {
		return writeJSON(w, resource.NewWebhookDeliveries(ds))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEVENT\tTYPE\tSTATUS\tATTEMPTS\tLAST ANSWER\tLAST ERROR\tNEXT ATTEMPT\tCREATED")
	for _, d := range ds {
		last, lastErr := "-", "-"
		if n := len(d.Attempts); n > 0 {
			if s := d.Attempts[n-1].ResponseStatus; s != nil {
				last = strconv.Itoa(*s)
			}
			if msg := d.Attempts[n-1].Error; msg != nil {
				lastErr = strconv.Quote(*msg)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.EventPublicID, d.EventType, d.Status, len(d.Attempts),
			last, lastErr, humanTime(d.NextAttemptAt), humanTime(&d.CreatedAt))
	}
	return tw.Flush()
}

// webhooksRetry makes a delivery due now, with a new retry window, and
// records it in the audit trail.
func webhooksRetry(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("webhooks retry", flag.ContinueOnError)
	setUsage(fs, "webhooks retry DELIVERY_ID",
		"Makes a delivery due now with a new WEBHOOK_RETRY_FOR window: a failed one is retried, a delivered one sent again (the receiver drops a duplicate by the event's id). Recorded in the audit trail.")
	id, ok, err := oneArg(fs, e, "webhooks retry", "delivery ID (see `licensor webhooks deliveries ENDPOINT_ID`)")
	if !ok {
		return err
	}
	return withIntents(ctx, e, func(b *Base) error {
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

// oneArg parses a subcommand that takes one argument (what) and flags, on
// either side of it; ok is false when the command should stop there.
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
	if !request.IsID(args[0]) { // cannot exist: not found, without asking the database
		return "", false, fmt.Errorf("%s %q: %w", name, args[0], webhooks.ErrNotFound)
	}
	return args[0], true, nil
}
