package http

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/internal/ptr"
)

// The bodies below are Laravel's: a resource collection of a
// LengthAwarePaginator (PaginatedResourceResponse: "links" and "meta",
// which is the paginator's toArray without data and the *_page_url keys),
// and of a CursorPaginator. The struct fields are in the order Laravel's
// arrays have their keys, so the JSON reads as Laravel's does.

// paginatorLinks is the "links" of a paginated resource collection.
type paginatorLinks struct {
	First *string `json:"first"`
	Last  *string `json:"last"`
	Prev  *string `json:"prev"`
	Next  *string `json:"next"`
}

// pageLink is one entry of LengthAwarePaginator::linkCollection() as
// Laravel 12.23 and later render it: {"url","label","page","active"}, page
// the number the link goes to (null for a Previous or Next that goes
// nowhere). A "..." separator has no page key at all, as in Laravel.
type pageLink struct {
	URL    *string
	Label  string
	Page   *int
	Active bool
	sep    bool // the "..." separator: url null, no page
}

var _ json.Marshaler = pageLink{}

// MarshalJSON writes the link's keys in Laravel's order.
func (l pageLink) MarshalJSON() ([]byte, error) {
	if l.sep {
		return resource.Marshal(struct {
			URL    *string `json:"url"`
			Label  string  `json:"label"`
			Active bool    `json:"active"`
		}{nil, l.Label, false})
	}
	return resource.Marshal(struct {
		URL    *string `json:"url"`
		Label  string  `json:"label"`
		Page   *int    `json:"page"`
		Active bool    `json:"active"`
	}{l.URL, l.Label, l.Page, l.Active})
}

// lengthAwareMeta is the "meta" of a LengthAwarePaginator.
type lengthAwareMeta struct {
	CurrentPage int        `json:"current_page"`
	From        *int       `json:"from"`
	LastPage    int        `json:"last_page"`
	Links       []pageLink `json:"links"`
	Path        string     `json:"path"`
	PerPage     int        `json:"per_page"`
	To          *int       `json:"to"`
	Total       int64      `json:"total"`
}

// cursorMeta is the "meta" of a CursorPaginator.
type cursorMeta struct {
	Path       string  `json:"path"`
	PerPage    int     `json:"per_page"`
	NextCursor *string `json:"next_cursor"`
	PrevCursor *string `json:"prev_cursor"`
}

type lengthAwareBody struct {
	Data  any             `json:"data"`
	Links paginatorLinks  `json:"links"`
	Meta  lengthAwareMeta `json:"meta"`
}

type cursorBody struct {
	Data  any            `json:"data"`
	Links paginatorLinks `json:"links"`
	Meta  cursorMeta     `json:"meta"`
}

// pager builds the URLs of a listing: path is the absolute URL without its
// query; query is what the links carry besides the page or cursor (Laravel's
// appends), already encoded, "" for nothing.
type pager struct {
	path  string
	query string
}

func (p pager) url(param, value string) string {
	return p.path + "?" + p.query + param + "=" + value
}

func (p pager) pageURL(page int) *string {
	s := p.url("page", strconv.Itoa(max(page, 1)))
	return &s
}

// lengthAware renders a page as Laravel's LengthAwarePaginator does, with
// its default onEachSide of 3.
func (p pager) lengthAware(data any, count int, page, perPage int, total int64) lengthAwareBody {
	lastPage := max(1, int((total+int64(perPage)-1)/int64(perPage)))
	m := lengthAwareMeta{CurrentPage: page, LastPage: lastPage, Path: p.path, PerPage: perPage, Total: total}
	if count > 0 {
		from, to := (page-1)*perPage+1, (page-1)*perPage+count
		m.From, m.To = &from, &to
	}
	var prev, next *string
	var prevPage, nextPage *int
	if page > 1 {
		prev, prevPage = p.pageURL(page-1), ptr.To(page-1)
	}
	if page < lastPage {
		next, nextPage = p.pageURL(page+1), ptr.To(page+1)
	}
	m.Links = append(m.Links, pageLink{URL: prev, Label: "&laquo; Previous", Page: prevPage})
	for _, el := range urlWindow(page, lastPage, 3) {
		if el == 0 {
			m.Links = append(m.Links, pageLink{Label: "...", sep: true})
			continue
		}
		m.Links = append(m.Links, pageLink{URL: p.pageURL(el), Label: strconv.Itoa(el), Page: ptr.To(el), Active: el == page})
	}
	m.Links = append(m.Links, pageLink{URL: next, Label: "Next &raquo;", Page: nextPage})
	return lengthAwareBody{Data: data, Links: paginatorLinks{First: p.pageURL(1), Last: p.pageURL(lastPage), Prev: prev, Next: next}, Meta: m}
}

// urlWindow is Illuminate\Pagination\UrlWindow: the page numbers the links
// show, 0 standing for a "..." separator.
func urlWindow(current, last, onEachSide int) []int {
	pages := func(from, to int) []int {
		var r []int
		for i := from; i <= to; i++ {
			r = append(r, i)
		}
		return r
	}
	if last < onEachSide*2+8 {
		return pages(1, last)
	}
	window := onEachSide + 4
	start, finish := pages(1, 2), pages(last-1, last)
	switch {
	case current <= window:
		return append(append(pages(1, window+onEachSide), 0), finish...)
	case current > last-window:
		return append(append(start, 0), pages(last-(window+(onEachSide-1)), last)...)
	}
	out := append(append(start, 0), pages(current-onEachSide, current+onEachSide)...)
	return append(append(out, 0), finish...)
}

// cursorPaginated renders a keyset page as Laravel's CursorPaginator does:
// previousCursor and nextCursor by its rules, each from the page's first or
// last row.
func (p pager) cursorPaginated(data any, rows []licenses.License, cur *licenses.Cursor, more bool, perPage int) cursorBody {
	body := cursorBody{Data: data, Meta: cursorMeta{Path: p.path, PerPage: perPage}}
	if len(rows) > 0 && cur != nil && !(!cur.Next && !more) {
		c := encodeCursor(licenses.Cursor{CreatedAt: rows[0].CreatedAt, ID: rows[0].ID, Next: false})
		u := p.url("cursor", c)
		body.Meta.PrevCursor, body.Links.Prev = &c, &u
	}
	if len(rows) > 0 && !(cur == nil && !more) && !(cur != nil && cur.Next && !more) {
		last := rows[len(rows)-1]
		c := encodeCursor(licenses.Cursor{CreatedAt: last.CreatedAt, ID: last.ID, Next: true})
		u := p.url("cursor", c)
		body.Meta.NextCursor, body.Links.Next = &c, &u
	}
	return body
}

// cursorJSON is what a cursor encodes, as Laravel's Cursor::encode: the
// ordering columns of the boundary row and _pointsToNextItems.
type cursorJSON struct {
	CreatedAt    string `json:"created_at"`
	ID           string `json:"id"`
	PointsToNext bool   `json:"_pointsToNextItems"`
}

// encodeCursor is base64url (no padding) of the cursor's JSON.
func encodeCursor(c licenses.Cursor) string {
	b, _ := json.Marshal(cursorJSON{CreatedAt: events.Time(c.CreatedAt), ID: c.ID, PointsToNext: c.Next})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor encodeCursor made; ok is false for anything
// else, a cursor whose id no license can have among them (request.IsID). Padding and the standard alphabet are accepted, as Laravel's
// decoder does.
func decodeCursor(s string) (licenses.Cursor, bool) {
	s = strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(s), "=")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return licenses.Cursor{}, false
	}
	var cj cursorJSON
	if err := json.Unmarshal(b, &cj); err != nil || !request.IsID(cj.ID) {
		return licenses.Cursor{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, cj.CreatedAt)
	if err != nil {
		return licenses.Cursor{}, false
	}
	return licenses.Cursor{CreatedAt: t.UTC(), ID: cj.ID, Next: cj.PointsToNext}, true
}

// maxPage is the largest page number served as asked; a page past it (no
// listing has that many pages) is page 1, as any other page number
// that cannot be used is, rather than an offset that overflows.
const maxPage = 1<<31 - 1

// queryPage is the page a listing shows, as Laravel's
// Paginator::resolveCurrentPage decides it: the page query parameter when
// filter_var(FILTER_VALIDATE_INT) takes it and it is at least 1, else 1.
// Never a validation error: ?page=abc, ?page=0 and ?page=-1 are page 1.
func queryPage(c echo.Context) int {
	n, ok := filterInt(c.QueryParam("page"))
	if !ok || n < 1 || n > maxPage {
		return 1
	}
	return int(n)
}

// queryPerPage reads per_page, licensor's own rule declared as Laravel
// would, ['nullable', 'integer', 'min:1', 'max:100']: absent or empty is
// def; else every rule that fails adds its message under per_page, in
// that order.
func queryPerPage(c echo.Context, def int, fields map[string][]string) int {
	raw := c.QueryParam("per_page")
	if raw == "" {
		return def
	}
	var msgs []string
	n, isInt := filterInt(raw)
	if !isInt {
		msgs = append(msgs, "The per page field must be an integer.")
	}
	size := phpSize(raw)
	if size < 1 {
		msgs = append(msgs, "The per page field must be at least 1.")
	}
	if size > 100 {
		msgs = append(msgs, "The per page field must not be greater than 100.")
	}
	if len(msgs) > 0 {
		fields["per_page"] = msgs
		return def
	}
	return int(n)
}

// filterInt is PHP's filter_var($s, FILTER_VALIDATE_INT): surrounding
// whitespace trimmed, an optional sign, then 0 or digits without a leading
// zero, within 64 bits.
func filterInt(s string) (int64, bool) {
	s = strings.Trim(s, " \t\r\n\v\x00")
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// phpSize is the size Laravel's min and max rules measure for a field
// with a numeric rule (integer): the number when PHP's is_numeric takes the
// value, else its length in characters.
func phpSize(s string) float64 {
	t := strings.TrimLeft(strings.TrimRight(s, " \t\r\n\v\f"), " \t\r\n\v\f")
	numeric := t != "" && !strings.ContainsAny(t, "xXpP_iInN")
	if f, err := strconv.ParseFloat(t, 64); numeric && err == nil {
		return f
	}
	return float64(utf8.RuneCountInString(s))
}
