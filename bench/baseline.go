package main

import (
	"context"
	"errors"
	"fmt"
)

// baselineCases compares licensor with itself at another revision
// (-baseline): the keyed and keyless creates, the replay, the show and the
// list's first cursor page, each served by the licensor
// that migrated its own database (the revisions' schemas differ), from one
// set of alternated rounds. It measures what a change costs, before and
// after, where the change cannot be switched off (the recovery points, the
// consumer events' outbox).
func (b *bench) baselineCases(ctx context.Context, rep *dbReport, dialect string, m *mainDB) (err error) {
	base, err := b.setupMainOf(ctx, b.baseBin, dialect, "baseline")
	if base != nil && base.srv != nil {
		defer func() { err = errors.Join(err, b.stopProcess(base.srv)) }()
	}
	if err != nil {
		return fmt.Errorf("the baseline at %s: %w", b.opts.baseline, err)
	}
	this, old := "this tree", b.opts.baseline
	if b.opts.against != "" {
		this = b.opts.against
	}
	rep.notes = append(rep.notes, fmt.Sprintf("baseline: %s against %s, each licensor on a database it migrated itself", this, old))
	conns := b.opts.conns
	title := cmpBaseline + " (" + this + " vs " + old + ")"
	return b.compareRounds(ctx, rep, title, []caseSpec{
		fixedCase("keyed create, "+this, conns, m.current, m.creates(true)),
		fixedCase("keyed create, "+old, conns, base.current, base.creates(true)),
		fixedCase("replay, "+this, conns, m.current, m.replay),
		fixedCase("replay, "+old, conns, base.current, base.replay),
		fixedCase("keyless create, "+this, conns, m.current, m.creates(false)),
		fixedCase("keyless create, "+old, conns, base.current, base.creates(false)),
		fixedCase("show, "+this, conns, m.current, m.show),
		fixedCase("show, "+old, conns, base.current, base.show),
		fixedCase("list (cursor page), "+this, conns, m.current, m.list),
		fixedCase("list (cursor page), "+old, conns, base.current, base.list),
	}, []pairing{
		{title + ": keyed create", 0, 1},
		{title + ": replay", 2, 3},
		{title + ": keyless create", 4, 5},
		{title + ": show", 6, 7},
		{title + ": list", 8, 9},
	})
}
