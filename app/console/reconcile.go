package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

// reconcile is `licensor reconcile`: one pass over the due pending intents.
func reconcile(ctx context.Context, e env) error {
	const summary = "One pass over pending intents: each is settled through the vendor's sites for its domain."
	if ok, err := noArgs(e, "reconcile", summary); !ok {
		return err
	}
	a, err := loadApp(ctx, e)
	if err != nil {
		return err
	}
	settled, err := a.Reconciler.RunOnce(ctx)
	for _, s := range settled {
		fmt.Fprintf(e.stdout, "%s\t%s\tkey %s\t%s\t%s\n", s.Intent, s.Operation, s.KeyDigest, s.Result, s.Ref)
	}
	fmt.Fprintf(e.stdout, "%d pending intent(s) worked\n", len(settled))
	return errors.Join(err, a.Close())
}

// noArgs parses the flags of a command that takes none but --help; ok is
// false when the command should stop there (help printed, or err).
func noArgs(e env, name, summary string) (ok bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	setUsage(fs, name, summary)
	if ok, err := parseFlags(fs, e); !ok {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, usagef("%s: unexpected argument %q", name, fs.Arg(0))
	}
	return true, nil
}
