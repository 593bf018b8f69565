package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/licenses"
)

// drift is `licensor drift [--fix [--force]]`: one comparison of the
// vendor's sites with the licenses.
func drift(ctx context.Context, e env) error {
	const summary = "Compare every site the vendor holds with the licenses: a license whose site is gone, " +
		"whose status or key differs, whose site id now names another domain, and a vendor site no license holds. " +
		"Each line shows what --fix would do (\"would revoke\", …). --fix brings each license in line " +
		"(as the vendor's webhook would); an orphan site and a site of another domain are only reported.\n\n" +
		"Safeguards: --fix refuses VENDOR_DRIVER=fake (its sites live in one process: a new one has none); " +
		"a vendor listing no sites while licenses are in force is refused, never read as deletions (not even with --force); " +
		"more than DRIFT_MAX_FIX (default 25) revocations or key replacements apply nothing without --force.\n\n" +
		"Exit status: 0 when nothing differs or every mismatch was fixed; 1 when mismatches remain " +
		"(found without --fix, refused, or not fixable), or the check failed; 2 for a mistake in the command line."
	fs := flag.NewFlagSet("drift", flag.ContinueOnError)
	fix := fs.Bool("fix", false, "apply the vendor's state to each license that differs")
	force := fs.Bool("force", false, "with --fix: apply more than DRIFT_MAX_FIX revocations or key replacements")
	vendorChange := fs.Bool("vendor-change", false, vendorChangeUsage)
	setUsage(fs, "drift [--fix [--force]] [--vendor-change]", summary)
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("drift: unexpected argument %q", fs.Arg(0))
	}
	if *force && !*fix {
		return usagef("drift: --force goes with --fix")
	}
	a, err := loadApp(ctx, e, *vendorChange)
	if err != nil {
		return err
	}
	err = runDriftCommand(ctx, a, e.stdout, *fix, *force)
	return errors.Join(err, a.Close())
}

// runDriftCommand is drift's work on a built application.
func runDriftCommand(ctx context.Context, a *App, stdout io.Writer, fix, force bool) error {
	fake := a.Config.Vendor.Driver == "fake"
	if fix && fake {
		return errors.New("drift --fix: refused with VENDOR_DRIVER=fake: the fake vendor's sites live in the process " +
			"that created them, so a new process sees none and every license would look deleted; nothing applied " +
			"(`licensor drift` shows the comparison; fix against a real vendor, VENDOR_DRIVER=http)")
	}
	if a.madeByHTTP() {
		return errors.New("drift: refused with VENDOR_DRIVER=fake: the database's licenses were made with the http driver, " +
			"which the fake knows nothing of; nothing compared")
	}
	lister, ok := a.Vendor.(licenses.SiteLister)
	if !ok {
		return errors.New("drift: the vendor driver cannot list its sites")
	}
	report, err := a.Licenses.DriftWith(ctx, lister, licenses.DriftOptions{Fix: fix, MaxFix: a.Config.DriftMaxFix, Force: force})
	if err == nil || errors.Is(err, licenses.ErrTooManyFixes) { // the comparison itself went through
		recordDrift(ctx, a, report)
	}
	if errors.Is(err, licenses.ErrVendorListsNothing) && fake {
		err = fmt.Errorf("%w (VENDOR_DRIVER=fake: the fake vendor's sites live in the process that created them)", err)
	}
	for _, m := range report.Mismatches {
		fmt.Fprintf(stdout, "%s\tlicense %s\tsite %s\t%s\t%s\n", m.Kind, orDash(m.LicenseID), m.SiteID, m.Domain, outcome(m, fix, err))
	}
	fmt.Fprintf(stdout, "%d site(s), %d license(s) compared, %d mismatch(es)", report.Sites, report.Licenses, len(report.Mismatches))
	if fix && err == nil {
		fmt.Fprintf(stdout, ", %d fixed", len(report.Mismatches)-report.Unfixed())
	}
	fmt.Fprintln(stdout)
	if errors.Is(err, licenses.ErrTooManyFixes) {
		return fmt.Errorf("drift --fix: %w (DRIFT_MAX_FIX=%d); check the vendor's list, then run with --force to apply them", err, a.Config.DriftMaxFix)
	}
	if err != nil {
		return fmt.Errorf("drift: %w", err)
	}
	if report.Unfixed() > 0 {
		return fmt.Errorf("drift: %d mismatch(es) not fixed", report.Unfixed())
	}
	return nil
}

// outcome is a mismatch line's last column: what a fix would do, or did.
func outcome(m licenses.Mismatch, fix bool, err error) string {
	switch {
	case m.Action == "":
		return "reported only"
	case m.Fixed:
		return "fixed"
	case fix && err == nil:
		return "not applied: already changed"
	}
	return "would " + m.Action
}

// recordDrift writes the last drift check's mismatches (those it left
// unfixed: all of them without --fix) to the activity counters' gauges, in
// all and by kind. A failure is logged: the check's outcome stands.
func recordDrift(ctx context.Context, a *App, report licenses.DriftReport) {
	byKind := make(map[string]int64, len(licenses.DriftKinds))
	var total int64
	for _, m := range report.Mismatches {
		if !m.Fixed {
			byKind[m.Kind]++
			total++
		}
	}
	err := a.Activity.Set(ctx, activity.DriftMismatches, total)
	for _, kind := range licenses.DriftKinds {
		err = errors.Join(err, a.Activity.Set(ctx, activity.DriftKind(kind), byKind[kind]))
	}
	if err != nil {
		a.Log.Warn("drift: record the mismatches for the console", "error", err)
	}
}
