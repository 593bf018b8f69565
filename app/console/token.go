package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/licensor-api/licensor/app/auth"
)

// tokenCmd is `licensor token issue|list|revoke`.
func tokenCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "token", "Issues, lists or revokes API tokens, in the configured database (no server needed).", []subcommand{
		{"issue", "issue a token to a consumer (created if new); prints the token alone on stdout", tokenIssue},
		{"list", "list the tokens, without their secrets", tokenList},
		{"revoke", "revoke a token: it stops working on the next request", tokenRevoke},
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
	return withAuth(ctx, e, func(svc *auth.Service) error {
		// The operator holds no token: any known ability may be granted here.
		issued, err := svc.Issue(ctx, auth.IssueInput{
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
	setUsage(fs, "token list [flags]", "Lists the tokens, newest first, as a table; secrets are stored nowhere and never shown.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	return withAuth(ctx, e, func(svc *auth.Service) error {
		toks, err := svc.List(ctx, *consumer)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCONSUMER\tNAME\tABILITIES\tEXPIRES\tLAST USED\tREVOKED")
		for _, t := range toks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Consumer.Name, t.Name,
				strings.Join(t.Abilities, ","), t.ExpiresAt.Format(time.RFC3339), orDash(t.LastUsedAt), orDash(t.RevokedAt))
		}
		return tw.Flush()
	})
}

func tokenRevoke(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("token revoke", flag.ContinueOnError)
	setUsage(fs, "token revoke ID", "Revokes the token (an ID from `licensor token list`): it stops working on the next request, on every replica.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("token revoke: give exactly one token ID (see `licensor token list`)")
	}
	return withAuth(ctx, e, func(svc *auth.Service) error {
		if err := svc.Revoke(ctx, fs.Arg(0)); err != nil {
			return fmt.Errorf("revoke %s: %w (see `licensor token list`)", fs.Arg(0), err)
		}
		fmt.Fprintf(e.stderr, "revoked token %s\n", fs.Arg(0))
		return nil
	})
}

// withAuth opens the Base (the migrated database, no vendor) and runs fn
// with its token service.
func withAuth(ctx context.Context, e env, fn func(*auth.Service) error) error {
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	return errors.Join(fn(b.Auth), b.Close())
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

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
