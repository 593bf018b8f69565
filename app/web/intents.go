package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/resource"
)

// intentsPerPage is how many intents a page of the list shows.
const intentsPerPage = 50

// ageOption is one choice of the intents' age filter: intents created
// longer ago than Age.
type ageOption struct {
	Value string // the query's value ("5m"); "" for any age
	Label string
	Age   time.Duration
}

// intentAges are the age filter's choices, in the order the select lists
// them.
var intentAges = []ageOption{
	{"", "any age", 0},
	{"5m", "older than 5 minutes", 5 * time.Minute},
	{"15m", "older than 15 minutes", 15 * time.Minute},
	{"1h", "older than 1 hour", time.Hour},
	{"6h", "older than 6 hours", 6 * time.Hour},
	{"24h", "older than 24 hours", 24 * time.Hour},
}

// intentsFilter is what the list's form asks for, as the query gave it.
type intentsFilter struct {
	Status    string
	Consumer  string
	Operation string
	Age       string
}

// intentsPage is the intents list's data.
type intentsPage struct {
	Filter     intentsFilter
	Statuses   []string
	Operations []string
	Ages       []ageOption
	Errors     map[string]string // a filter's value that is not one of its choices
	Rows       []resource.Intent
	Pager      pager
	Now        time.Time
}

// intents is GET /console/intents?status=&consumer=&operation=&age=&page=:
// any consumer's intents, oldest first, as GET /api/intents lists them. A
// consumer name nobody has lists nothing, as the API does; a status,
// operation or age that is none of the form's choices is the form's own
// error (422).
func (cn *Console) intents(c visit) error {
	f := intentsFilter{Status: c.QueryParam("status"), Consumer: c.QueryParam("consumer"),
		Operation: c.QueryParam("operation"), Age: c.QueryParam("age")}
	now := cn.cfg.Now()
	p := intentsPage{Filter: f, Statuses: idempotency.Statuses, Operations: cn.cfg.Operations.Names(), Ages: intentAges, Now: now,
		Pager: pager{Page: queryPage(c), LastPage: 1}}
	filter, errs := p.intentFilter(now)
	if len(errs) > 0 {
		p.Errors = errs
		return cn.render(c, http.StatusUnprocessableEntity, "intents", view{Title: "Intents", Section: "intents", Data: p})
	}
	if err := cn.listIntents(c, &p, filter); err != nil {
		return err
	}
	return cn.render(c, http.StatusOK, "intents", view{Title: "Intents", Section: "intents", Data: p})
}

// intentFilter is the store's filter of the form's values, or what is wrong
// with them, by field.
func (p *intentsPage) intentFilter(now time.Time) (idempotency.IntentFilter, map[string]string) {
	f := idempotency.IntentFilter{Status: p.Filter.Status, Operation: p.Filter.Operation, Page: p.Pager.Page, PerPage: intentsPerPage}
	errs := map[string]string{}
	if f.Status != "" && !slices.Contains(p.Statuses, f.Status) {
		errs["status"] = "Choose one of the statuses listed."
	}
	if op := p.Filter.Operation; op != "" && !slices.Contains(p.Operations, op) {
		errs["operation"] = "Choose one of the operations listed."
	}
	i := slices.IndexFunc(intentAges, func(a ageOption) bool { return a.Value == p.Filter.Age })
	switch {
	case i < 0:
		errs["age"] = "Choose one of the ages listed."
	case intentAges[i].Age > 0:
		f.Before = now.Add(-intentAges[i].Age)
	}
	return f, errs
}

// listIntents fills p's rows and pager from the store, f narrowed to the
// named consumer (none by that name: no rows).
func (cn *Console) listIntents(c echo.Context, p *intentsPage, f idempotency.IntentFilter) error {
	ctx := c.Request().Context()
	if p.Filter.Consumer != "" {
		id, found, err := cn.consumerID(ctx, p.Filter.Consumer)
		if err != nil || !found {
			return err
		}
		f.ConsumerID = id
	}
	list, total, err := cn.cfg.Intents.Intents(ctx, f)
	if err != nil {
		return err
	}
	names, err := cn.consumerNames(c, intentConsumers(list)...)
	if err != nil {
		return err
	}
	p.Rows = resource.NewIntents(list, names)
	filter := map[string]string{"status": p.Filter.Status, "consumer": p.Filter.Consumer, "operation": p.Filter.Operation, "age": p.Filter.Age}
	p.Pager = newPager(Prefix+"/intents", filter, p.Pager.Page, intentsPerPage, total)
	return nil
}

func intentConsumers(list []idempotency.Intent) []string {
	ids := make([]string, 0, len(list))
	for _, in := range list {
		ids = append(ids, in.ConsumerID)
	}
	return ids
}

// consumerNames names the consumers of ids ("" ids and unknown ones stay
// unnamed).
func (cn *Console) consumerNames(c echo.Context, ids ...string) (map[string]string, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "" })
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	return cn.cfg.Auth.ConsumerNames(c.Request().Context(), ids)
}

// pager is where a list's page links go: Prev and Next are "" where there
// is no such page.
type pager struct {
	Page, LastPage int
	Total          int64
	Prev, Next     string
}

// newPager is the pager of page (of perPage rows, total in all) of the list
// at path, its links keeping the filter's values that are not empty.
func newPager(path string, filter map[string]string, page, perPage int, total int64) pager {
	p := pager{Page: page, Total: total, LastPage: max(1, int((total+int64(perPage)-1)/int64(perPage)))}
	link := func(n int) string {
		q := url.Values{"page": {strconv.Itoa(n)}}
		for k, v := range filter {
			if v != "" {
				q.Set(k, v)
			}
		}
		return path + "?" + q.Encode()
	}
	if page > 1 {
		p.Prev = link(min(page-1, p.LastPage))
	}
	if page < p.LastPage {
		p.Next = link(page + 1)
	}
	return p
}

// queryPage is the page query parameter: a whole number from 1, else 1.
func queryPage(c echo.Context) int {
	n, err := strconv.Atoi(c.QueryParam("page"))
	if err != nil || n < 1 || n > maxPage {
		return 1
	}
	return n
}

// maxPage bounds the page asked for, so that no offset overflows.
const maxPage = 1 << 20
