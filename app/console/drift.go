package console

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/licensor-api/licensor/app/licenses"
)

// drift is `licensor drift [--fix]`: one comparison of the vendor's sites
// with the licenses.
func drift(ctx context.Context, e env) error {
	const summary = "Compare every site the vendor holds with the licenses: a license whose site is gone, " +
		"whose status or key differs, and a vendor site no license holds. --fix brings each license in line " +
		"(as the vendor's webhook would); an orphan site is only reported."
	fs := flag.NewFlagSet("drift", flag.ContinueOnError)
	fix := fs.Bool("fix", false, "apply the vendor's state to each license that differs")
	setUsage(fs, "drift", summary)
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("drift: unexpected argument %q", fs.Arg(0))
	}
	a, err := loadApp(ctx, e)
	if err != nil {
		return err
	}
	lister, ok := a.Vendor.(licenses.SiteLister)
	if !ok {
		return errors.Join(errors.New("drift: the vendor driver cannot list its sites"), a.Close())
	}
	report, err := a.Licenses.Drift(ctx, lister, *fix)
	for _, m := range report.Mismatches {
		fixed := ""
		if m.Fixed {
			fixed = "\tfixed"
		}
		fmt.Fprintf(e.stdout, "%s\tlicense %s\tsite %s\t%s%s\n", m.Kind, dash(m.LicenseID), m.SiteID, m.Domain, fixed)
	}
	fmt.Fprintf(e.stdout, "%d site(s), %d license(s) compared, %d mismatch(es)\n", report.Sites, report.Licenses, len(report.Mismatches))
	return errors.Join(err, a.Close())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
