package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
)

// storeLicense creates a license: 201 for a new one, 200 for a domain the
// consumer already held (answered, not stored: a retry tells the truth of
// its own time). Its phases:
//
//	reserved   the consumer's license for the domain, if any, is the answer
//	started    from here the vendor may hear of it
//	vendor     the domain's site, found or made (no transaction open)
//	finished   the license row, its claim of the site, its events and the
//	           201, one transaction
//
// A site found spent at the last phase (its license revoked meanwhile, or
// discarded) is deleted at the vendor or about to be; a discarded one is
// deleted now (its first delete may have failed), and the vendor phase runs
// again, up to siteRounds times. Should the vendor list the same site
// again, it still has it: the license takes over the claim of the revoked
// license's (a vendor that gave the id again, or a revoke that deleted
// nothing there). A pending create is resumed by finding the
// vendor's site for the domain.
func storeLicense(svc *licenses.Service) idempotency.Operation[licenses.Input] {
	return idempotency.Operation[licenses.Input]{
		Name:    "licenses.store",
		Subject: func(in licenses.Input) string { return in.Domain },
		Run: func(ctx context.Context, x *idempotency.Execution, in licenses.Input) (idempotency.Response, error) {
			ctx = requestActor(ctx, x.Caller)
			if lic, err := svc.Held(ctx, x.ConsumerID, in.Domain); !errors.Is(err, licenses.ErrNotFound) {
				if err != nil {
					return idempotency.Response{}, err
				}
				created := madeBy(lic, x) // a retry after a crash: answered as it first was
				resp, err := licenseAnswer(lic, created)
				resp.NoEffect = !created
				return resp, err
			}
			if err := x.Start(ctx); err != nil {
				return idempotency.Response{}, err
			}
			spent := "" // the site found spent the round before
			for round := 1; ; round++ {
				site, made, err := svc.EnsureSite(ctx, in)
				if err != nil {
					return idempotency.Response{}, err
				}
				event := licenses.EventAdopted
				if made {
					event = licenses.EventCreated
				}
				resp, lic, err := recordLicense(ctx, svc, x, in, site, event, made, !made && site.ID == spent)
				switch {
				case errors.Is(err, licenses.ErrSiteSpent) && round < siteRounds:
					_ = svc.FinishDiscard(ctx, site, in.Domain) // a discarded one's delete, owed if it failed before
					spent = site.ID
					continue
				case errors.Is(err, gorm.ErrDuplicatedKey): // another create won the domain: answered as if second
					resp, err = licenseAnswer(lic, false)
					resp.NoEffect = true
				case err != nil && !errors.Is(err, licenses.ErrDomainTaken) && !refused(err):
					// The vendor holds the site but it is not recorded here: the outcome
					// is as unknown as a lost answer, and is reconciled the same way.
					err = &licenses.UncertainError{Err: err, Domain: in.Domain}
				}
				return resp, err
			}
		},
		Resume: func(ctx context.Context, x *idempotency.Execution, rec *idempotency.Record, mayCreate bool) (idempotency.Response, bool, error) {
			ctx = reconcilerActor(ctx, x.Caller)
			in, err := storedInput(rec)
			if err != nil {
				return idempotency.Response{}, false, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			spent := "" // the site found spent the round before
			for round := 1; ; round++ {
				site, err := svc.FindSite(ctx, in.Domain)
				made := false
				if err == nil && site == nil {
					if !mayCreate {
						return idempotency.Response{}, false, nil
					}
					if err := x.Start(ctx); err != nil { // still the intent's owner, just before the vendor hears of it
						return idempotency.Response{}, false, err
					}
					var found licenses.Site
					found, made, err = svc.EnsureSite(ctx, in)
					site = &found
				}
				var resp idempotency.Response
				var lic licenses.License
				if err == nil {
					resp, lic, err = recordLicense(ctx, svc, x, in, *site, licenses.EventReconciled, made, !made && site.ID == spent)
				}
				switch {
				case errors.Is(err, licenses.ErrSiteSpent) && round < siteRounds:
					_ = svc.FinishDiscard(ctx, *site, in.Domain) // a discarded one's delete, owed if it failed before
					spent = site.ID
					continue
				case errors.Is(err, gorm.ErrDuplicatedKey) && lic.IntentID != nil && !madeBy(lic, x): // moot
					return idempotency.Response{}, false, fmt.Errorf("%w: the license was made by another intent", idempotency.ErrSuperseded)
				case errors.Is(err, gorm.ErrDuplicatedKey):
					resp, err = licenseAnswer(lic, madeBy(lic, x))
				}
				var invalid *licenses.ValidationError
				if errors.As(err, &invalid) || errors.Is(err, licenses.ErrDomainTaken) || errors.Is(err, licenses.ErrVendorRejected) {
					return idempotency.Response{}, false, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
				}
				return resp, err == nil, err
			}
		},
		// A create that may have reached the vendor may have left a site
		// there: before its intent is discarded, a site for its domain that
		// no license holds is deleted, so that nobody pays for it.
		BeforeDiscard: func(ctx context.Context, rec *idempotency.Record) error {
			if rec.Subject != nil { // the normalised domain
				_, err := svc.ClearSite(ctx, *rec.Subject)
				return err
			}
			in, err := storedInput(rec)
			if err == nil {
				_, err = svc.ClearSite(ctx, in.Domain)
			}
			return err
		},
	}
}

// siteRounds is how many times a create looks for its domain's site (and
// makes one) when the one it found was spent before it could record it.
const siteRounds = 3

// recordLicense is a create's last phase: the license of site, its claim
// of the site, its events and its answer (201) commit with the record's
// completion. When the domain's license is already the consumer's (a
// race's winner) the error is gorm.ErrDuplicatedKey and lic is that
// license. A site nobody will hold is discarded (DiscardSite): one this
// create made and may not record (the intent superseded or its lease
// lost), or one it made or found for a domain another license holds with
// another site (made by a create that met a revoking license). The claim
// decides: a site a license claimed (the intent's new owner's, the
// domain's holder's) is spared. A site kept by an unknown outcome (the
// transaction failed) while the intent is still this create's is the
// pending intent's, which the reconciler records; should a revoke
// supersede that intent first, the reconciler clears it. A discard that cannot be written makes the outcome unknown:
// the intent is kept for the reconciler, which finds the site again.
func recordLicense(ctx context.Context, svc *licenses.Service, x *idempotency.Execution, in licenses.Input, site licenses.Site, event string, made, reclaim bool) (resp idempotency.Response, lic licenses.License, err error) {
	defer func() {
		nobodys := errors.Is(err, licenses.ErrDomainTaken) || errors.Is(err, gorm.ErrDuplicatedKey) && lic.VendorSiteID != site.ID ||
			made && (refused(err) || err != nil && refused(x.Held(ctx)))
		if err == nil || errors.Is(err, licenses.ErrSiteSpent) || !nobodys {
			return
		}
		if derr := svc.DiscardSite(ctx, site, in.Domain); derr != nil {
			resp, err = idempotency.Response{}, &licenses.UncertainError{Err: fmt.Errorf("%w (the site could not be recorded: %v)", derr, err), Domain: in.Domain}
		}
	}()
	draft, err := svc.Draft(ctx, x.ConsumerID, in, site, event, x.IntentID())
	if err != nil {
		return idempotency.Response{}, licenses.License{}, fmt.Errorf("store license: %w", err)
	}
	draft.Reclaim = reclaim
	resp, err = x.Finish(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
		if err := svc.Insert(tx, draft); err != nil {
			return idempotency.Response{}, err
		}
		return licenseAnswer(draft.License, true)
	})
	switch {
	case err == nil:
		svc.LicenseMade()
		return resp, draft.License, nil
	case errors.Is(err, gorm.ErrDuplicatedKey):
		lic, herr := svc.Held(ctx, x.ConsumerID, in.Domain)
		if herr != nil {
			return idempotency.Response{}, lic, herr
		}
		return idempotency.Response{}, lic, err
	}
	return idempotency.Response{}, licenses.License{}, err
}

// licenseAnswer is a create's answer, rendered once: 201 for a license made
// now (or by this intent before), 200 for one the consumer held.
func licenseAnswer(lic licenses.License, created bool) (idempotency.Response, error) {
	resp, err := resource.LicenseCreated(lic, created)
	resp.ResourceType, resp.ResourceID, resp.ExternalRef = "license", lic.ID, lic.VendorSiteID
	return resp, err
}

// madeBy reports whether lic was created by x's intent.
func madeBy(lic licenses.License, x *idempotency.Execution) bool {
	return lic.IntentID != nil && *lic.IntentID == x.IntentID()
}

// storedInput is a create's request as its record keeps it, validated.
func storedInput(rec *idempotency.Record) (licenses.Input, error) {
	in, err := request.StoredStoreLicense(rec.RequestBody)
	if err != nil {
		return in, fmt.Errorf("stored request: %w", err)
	}
	return licenses.Validate(in)
}

// refused reports whether err is the idempotency layer refusing a phase:
// the intent was superseded, or its lease lost.
func refused(err error) bool {
	return errors.Is(err, idempotency.ErrSuperseded) || errors.Is(err, idempotency.ErrLeaseLost)
}

// revokeLicense revokes a license: 204, and 204 again. The license's id is
// the key. Its phases:
//
//	reserved   the consumer's license (a revoked one is done)
//	started    from here the vendor may hear of it; the license is revoking
//	vendor     the site deleted (no transaction open)
//	finished   the license revoked, its events, the supersession of the
//	           consumer's open creates for its domain (which can then never
//	           bring it back) and of the license's open rotations, and the
//	           204, one transaction
//
// A delete is safe to repeat, so a pending revoke is resumed at once, and
// a failed one is retried, never discarded: its license waits on it.
func revokeLicense(svc *licenses.Service, creates, rotations string) idempotency.Operation[string] {
	finish := func(ctx context.Context, x *idempotency.Execution, lic licenses.License) (idempotency.Response, error) {
		if err := svc.DeleteSite(ctx, lic); err != nil {
			return revoked(lic.ID), err
		}
		_, err := x.Finish(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
			moved, err := svc.Revoked(ctx, tx, lic)
			if err == nil && moved { // and a revoked license's key is never rotated
				if err = x.Supersede(tx, creates, lic.Domain); err == nil {
					err = x.Supersede(tx, rotations, lic.ID)
				}
			}
			return revoked(lic.ID), err
		})
		if err != nil && !refused(err) {
			// The vendor deleted the site and we could not record it: as unknown
			// as a lost answer, and finished the same way (a 404 counts as done).
			err = &licenses.UncertainError{Err: err}
		}
		return revoked(lic.ID), err
	}
	return idempotency.Operation[string]{
		Name:      "licenses.destroy",
		RetryOnly: true,
		Run: func(ctx context.Context, x *idempotency.Execution, id string) (idempotency.Response, error) {
			ctx = requestActor(ctx, x.Caller)
			lic, err := svc.Revocable(ctx, x.ConsumerID, id)
			if err != nil || lic.Status == licenses.StatusRevoked {
				return revoked(id), err
			}
			if err := x.Start(ctx); err != nil {
				return revoked(id), err
			}
			marked, err := svc.MarkRevoking(ctx, lic)
			if err != nil {
				return revoked(id), err
			}
			resp, err := finish(ctx, x, lic)
			var uncertain *licenses.UncertainError
			switch {
			case err == nil || errors.As(err, &uncertain) || refused(err):
			case !marked:
				// An earlier attempt marked it revoking and may have reached the
				// vendor: keep the intent for the reconciler rather than reopen it.
				err = &licenses.UncertainError{Err: err}
			default: // nothing happened at the vendor: the license is as it was
				if rerr := svc.Reopen(ctx, lic); rerr != nil {
					err = &licenses.UncertainError{Err: errors.Join(err, rerr)}
				}
			}
			return resp, err
		},
		Resume: func(ctx context.Context, x *idempotency.Execution, rec *idempotency.Record, _ bool) (idempotency.Response, bool, error) {
			ctx = reconcilerActor(ctx, x.Caller)
			lic, err := svc.Revocable(ctx, rec.ConsumerID, rec.Key)
			switch {
			case errors.Is(err, licenses.ErrNotFound):
				return idempotency.Response{}, false, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			case err != nil:
				return idempotency.Response{}, false, err
			case lic.Status == licenses.StatusRevoked:
				return revoked(lic.ID), true, nil
			}
			resp, err := finish(ctx, x, lic)
			return resp, err == nil, err
		},
	}
}

// revoked is a revoke's answer: 204, about the license.
func revoked(id string) idempotency.Response {
	return idempotency.Response{Status: http.StatusNoContent, Headers: map[string]string{}, ResourceType: "license", ResourceID: id}
}
