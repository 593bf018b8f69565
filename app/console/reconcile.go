package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

func reconcile(ctx context.Context, e env) error {
	const summary = "One pass over pending intents: each is settled through the vendor's sites for its domain."
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	vendorChange := fs.Bool("vendor-change", false, vendorChangeUsage)
	if ok, err := flagsOnly(fs, e, "reconcile [--vendor-change]", summary); !ok {
		return err
	}
	a, err := loadApp(ctx, e, *vendorChange)
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

// noArgs parses a command that takes nothing but --help; ok is false when the
// command should stop there (help printed, or err).
func noArgs(e env, name, summary string) (ok bool, err error) {
	return flagsOnly(flag.NewFlagSet(name, flag.ContinueOnError), e, name, summary)
}

// flagsOnly parses fs's flags for a command that takes no argument.
func flagsOnly(fs *flag.FlagSet, e env, line, summary string) (ok bool, err error) {
	setUsage(fs, line, summary)
	if ok, err := parseFlags(fs, e); !ok {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return true, nil
}
