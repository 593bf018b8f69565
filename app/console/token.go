package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
)

// tokenCmd is `licensor token issue|list|revoke|events`. What it issues and
// revokes is in the audit trail with the actor console.
func tokenCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "token", "Issues, lists or revokes API tokens, and lists their audit trail, in the configured database (no server needed).", []subcommand{
		{"issue", "issue a token to a consumer (created if new); prints the token alone on stdout", tokenIssue},
		{"list", "list the tokens, without their secrets", tokenList},
		{"revoke", "revoke a token: it stops working on the next request", tokenRevoke},
		{"events", "list the tokens' audit trail (issued, revoked), newest first: --token ID, --page, --per-page, --json", tokenEvents},
	})
}

// tokenIssue prints the new token alone on stdout, so that
// TOKEN=$(licensor token issue …) works; everything else goes to stderr.
func tokenIssue(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("token issue", flag.ContinueOnError)
	consumer := fs.String("consumer", "", "the consumer's name (created if it does not exist)")
	abilities := fs.String("abilities", "", "comma-separated: "+strings.Join(auth.Known, ", "))
	name := fs.String("name", "cli", "a label for the token")
	ttl := fs.Duration("ttl", 0, "lifetime, e.g. 720h (default TOKEN_TTL)")
	setUsage(fs, "token issue [flags]", "Issues a token to the consumer, creating it if it is new; the token alone goes to stdout: TOKEN=$(licensor token issue …).")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if *consumer == "" || *abilities == "" {
		return usagef("token issue: --consumer and --abilities are required")
	}
	if *ttl < 0 {
		return usagef("token issue: --ttl must be positive")
	}
	for _, a := range splitList(*abilities) {
		if !auth.IsKnown(a) {
			return usagef("token issue: unknown ability %q (known: %s)", a, strings.Join(auth.Known, ", "))
		}
	}
	return withBase(ctx, e, func(b *Base) error {
		// The operator holds no token: any known ability may be granted here,
		// and the token names no issuer.
		issued, err := b.Auth.Issue(ctx, audit.Console(), auth.IssueInput{
			Consumer: *consumer, Abilities: splitList(*abilities), Name: *name, TTL: *ttl,
		})
		var ve *auth.ValidationError
		if errors.As(err, &ve) {
			return issueUsageError(ve)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "issued token %s for %s, abilities %s, expires %s\n",
			issued.ID, issued.Consumer.Name, strings.Join(issued.Abilities, ","), issued.ExpiresAt.Format(time.RFC3339))
		fmt.Fprintln(e.stdout, issued.Secret)
		return nil
	})
}

// issueFlags names the flag each of Issue's input fields comes from.
var issueFlags = map[string]string{"consumer": "--consumer", "abilities": "--abilities", "name": "--name", "expires_in": "--ttl"}

// issueUsageError turns Issue's refusal of the input (a --ttl above
// TOKEN_MAX_TTL, a consumer name with control characters or differing from
// an existing one only in case, …) into a usage error naming the flags.
func issueUsageError(ve *auth.ValidationError) error {
	fields := slices.Sorted(maps.Keys(ve.Fields))
	msgs := make([]string, 0, len(fields))
	for _, f := range fields {
		flagName := issueFlags[f]
		if flagName == "" {
			flagName = f
		}
		msgs = append(msgs, flagName+": "+strings.Join(ve.Fields[f], " "))
	}
	return usagef("token issue: %s", strings.Join(msgs, "; "))
}

func tokenList(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("token list", flag.ContinueOnError)
	consumer := fs.String("consumer", "", "only this consumer's tokens")
	asJSON := fs.Bool("json", false, "print a JSON array (GET /api/tokens' objects) instead of a table")
	setUsage(fs, "token list [flags]", "Lists the tokens, newest first, as a table or a JSON array; secrets are stored nowhere and never shown. ISSUED BY is the token that issued it, - for the command line.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	return withBase(ctx, e, func(b *Base) error {
		toks, err := b.Auth.List(ctx, *consumer)
		if err != nil {
			return err
		}
		return writeList(e.stdout, *asJSON, tokenColumns, resource.NewTokens(toks))
	})
}

func tokenRevoke(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("token revoke", flag.ContinueOnError)
	setUsage(fs, "token revoke ID", "Revokes the token (an ID from `licensor token list`): it stops working on the next request, on every replica. The revoke is in the audit trail (actor console); a token revoked already stays as it is.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("token revoke: give exactly one token ID (see `licensor token list`)")
	}
	if !request.IsID(fs.Arg(0)) { // cannot exist: not found, without asking the database
		return fmt.Errorf("revoke %q: %w (see `licensor token list`)", fs.Arg(0), auth.ErrTokenNotFound)
	}
	return withBase(ctx, e, func(b *Base) error {
		if err := b.Auth.Revoke(ctx, audit.Console(), fs.Arg(0)); err != nil {
			return fmt.Errorf("revoke %s: %w (see `licensor token list`)", fs.Arg(0), err)
		}
		fmt.Fprintf(e.stderr, "revoked token %s\n", fs.Arg(0))
		return nil
	})
}

// tokenEvents prints one page of the tokens' audit trail, newest first, as
// a table or as the JSON array of the API's objects; the page line goes to
// stderr.
func tokenEvents(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("token events", flag.ContinueOnError)
	token := fs.String("token", "", "only this token's events, by id")
	page := fs.Int("page", 1, "the page, from 1")
	perPage := fs.Int("per-page", 50, "events per page, 1 to 100")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	setUsage(fs, "token events [flags]", "Lists the tokens' audit trail, newest first: each token issued or revoked, by which token (console: the command line), in which request.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("token events: unexpected argument %q (flags only; --token ID for one token)", fs.Arg(0))
	case *page < 1:
		return usagef("token events: --page must be 1 or more")
	case *perPage < 1 || *perPage > 100:
		return usagef("token events: --per-page must be between 1 and 100")
	case *token != "" && !request.IsID(*token):
		*token = impossibleID // no token has it: the trail is empty, as the API answers, without a comparison the database refuses
	}
	return withBase(ctx, e, func(b *Base) error {
		events, total, err := b.Auth.Events(ctx, auth.TokenEventFilter{TokenID: *token, Page: *page, PerPage: *perPage})
		if err != nil {
			return err
		}
		if err := writeList(e.stdout, *asJSON, tokenEventColumns, resource.NewTokenEvents(events)); err != nil {
			return err
		}
		lastPage := max(1, (total+int64(*perPage)-1)/int64(*perPage))
		fmt.Fprintf(e.stderr, "page %d of %d (%d in all)\n", *page, lastPage, total)
		return nil
	})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// tokenColumns are the table of `token list`: never a secret.
var tokenColumns = []column[resource.Token]{
	{"ID", func(t resource.Token) string { return t.ID }},
	{"CONSUMER", func(t resource.Token) string { return t.Consumer }},
	{"NAME", func(t resource.Token) string { return t.Name }},
	{"ABILITIES", func(t resource.Token) string { return strings.Join(t.Abilities, ",") }},
	{"ISSUED BY", func(t resource.Token) string { return orNone(t.IssuedBy) }},
	{"EXPIRES", func(t resource.Token) string { return when(t.ExpiresAt) }},
	{"LAST USED", func(t resource.Token) string { return when(t.LastUsedAt) }},
	{"REVOKED", func(t resource.Token) string { return when(t.RevokedAt) }},
}

// tokenEventColumns are the table of `token events`.
var tokenEventColumns = []column[resource.TokenEvent]{
	{"ID", func(v resource.TokenEvent) string { return strconv.FormatUint(v.ID, 10) }},
	{"EVENT", func(v resource.TokenEvent) string { return v.Event }},
	{"TOKEN", func(v resource.TokenEvent) string { return v.TokenID }},
	{"CONSUMER", func(v resource.TokenEvent) string { return orNone(v.Consumer) }},
	{"ACTOR", func(v resource.TokenEvent) string { return v.Actor }},
	{"ACTOR TOKEN", func(v resource.TokenEvent) string { return orNone(v.ActorTokenID) }},
	{"ACTOR CONSUMER", func(v resource.TokenEvent) string { return orNone(v.ActorConsumer) }},
	{"REQUEST", func(v resource.TokenEvent) string { return orNone(v.RequestID) }},
	{"CREATED", func(v resource.TokenEvent) string { return when(v.CreatedAt) }},
}

// impossibleID is a well-formed id that no token has (ids are ULIDs made
// now, never of time zero): what a token id that cannot exist is asked as.
const impossibleID = "00000000000000000000000000"
