package web

import (
	"context"
	"net/http"
	"time"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/webhooks"
)

// dashboardPage is the dashboard's data. The intents' and the webhooks'
// parts are read only for a session whose token may see them
// (intents:manage, as GET /api/intents and GET /api/webhook-deliveries).
type dashboardPage struct {
	Now           time.Time
	Operator      bool             // the session holds intents:manage: the sections below are filled
	Intents       []statusCount    // intents by status, in the API's order
	Pending       int64            // intents pending now
	OldestPending time.Time        // when the oldest pending intent was created; zero: none
	Failed        int64            // intents failed, waiting for the slow retry or an operator
	Webhooks      webhooks.Backlog // deliveries owed, failing and failed
	Drift         driftSummary     // the last drift check
	Charts        []barChart       // creates, replays, conflicts, pending per hour
}

type statusCount struct {
	Status string
	Count  int64
}

// driftSummary is the last drift check's mismatch count, if one ran.
type driftSummary struct {
	Known      bool
	Mismatches int64
	At         time.Time
}

// dashboard is GET /console: intents by status, the oldest pending, the
// failed ones, drift mismatches, the webhook backlog, and the last day's
// activity per hour.
func (cn *Console) dashboard(c visit) error {
	ctx := c.Request().Context()
	d := dashboardPage{Now: cn.cfg.Now(), Operator: c.signed.principal.Abilities.Can(auth.IntentsManage)}
	if d.Operator {
		if err := cn.readDashboard(ctx, &d); err != nil {
			return err
		}
	}
	return cn.render(c, http.StatusOK, "dashboard", view{Title: "Dashboard", Section: "dashboard", Data: d})
}

func (cn *Console) readDashboard(ctx context.Context, d *dashboardPage) error {
	counts, err := cn.cfg.Intents.StatusCounts(ctx)
	if err != nil {
		return err
	}
	for _, st := range idempotency.Statuses {
		d.Intents = append(d.Intents, statusCount{Status: st, Count: counts[st]})
	}
	if d.Pending, d.OldestPending, d.Failed, err = cn.cfg.Intents.Backlog(ctx); err != nil {
		return err
	}
	if d.Webhooks, err = cn.cfg.Webhooks.Backlog(ctx); err != nil {
		return err
	}
	return cn.readActivity(ctx, d)
}

// charted are the dashboard's hourly series, in the order they are drawn.
var charted = []struct{ metric, id, title string }{
	{activity.Creates, "creates", "Licenses created"},
	{activity.Replays, "replays", "Replays"},
	{activity.Conflicts, "conflicts", "Conflicts (409, 422)"},
	{activity.Pending, "pending", "Pending answers (202)"},
}

const chartHours = 24

// readActivity fills d's charts and the last drift check from the counts
// licensor keeps (app/activity).
func (cn *Console) readActivity(ctx context.Context, d *dashboardPage) error {
	metrics := make([]string, len(charted))
	for i, ch := range charted {
		metrics[i] = ch.metric
	}
	series, err := cn.cfg.Activity.Series(ctx, metrics, chartHours)
	if err != nil {
		return err
	}
	for _, ch := range charted {
		counts := make([]hourCount, 0, chartHours)
		for _, p := range series[ch.metric] {
			counts = append(counts, hourCount{Hour: p.Hour, Count: p.Count})
		}
		d.Charts = append(d.Charts, newBarChart(ch.id, ch.title, counts))
	}
	n, at, ok, err := cn.cfg.Activity.Latest(ctx, activity.DriftMismatches)
	if err != nil {
		return err
	}
	d.Drift = driftSummary{Known: ok, Mismatches: n, At: at}
	return nil
}
