package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/resource"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// pages holds each page's template: the layout and the page's own file,
// parsed together, so that every page defines "title" and "content".
type pages struct {
	byName map[string]*template.Template
}

// funcs are the helpers every template may call.
var funcs = template.FuncMap{
	"time": formatTime,
	"ago":  ago,
	"hour": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:00 UTC") },
	"join": strings.Join,
	"sub":  func(a, b int) int { return a - b },
	"has":  func(p auth.Principal, ability string) bool { return p.Abilities.Can(ability) },
}

func mustParsePages() *pages {
	p := &pages{byName: map[string]*template.Template{}}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" || strings.HasPrefix(base, "_") {
			continue
		}
		files := []string{"templates/layout.html", name}
		partials, _ := fs.Glob(templateFiles, "templates/_*.html")
		files = append(files, partials...)
		p.byName[strings.TrimSuffix(base, ".html")] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, files...))
	}
	return p
}

// view is what every page is rendered with: the layout's part, and the
// page's own Data.
type view struct {
	Title     string
	Section   string // the navigation entry the page is under
	Signed    bool   // a session is open: the layout shows the navigation
	Principal auth.Principal
	CSRF      string // the form token of the session (or of the sign-in form)
	Flash     string // a one-line notice at the top of the page
	Version   string
	Data      any
}

// render writes the page name with status. A template error is returned
// before anything is written (the page is rendered to a buffer first).
func (cn *Console) render(c echo.Context, status int, name string, v view) error {
	t, ok := cn.pages.byName[name]
	if !ok {
		return fmt.Errorf("console: no page %q", name)
	}
	if vis, ok := c.(visit); ok && !v.Signed {
		v.Signed, v.Principal, v.CSRF = true, vis.signed.principal, cn.sessions.csrf(sessionCSRF, vis.signed.session.Nonce)
	}
	v.Version = cn.cfg.Version
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		return fmt.Errorf("console: render %s: %w", name, err)
	}
	if c.Request().Method == http.MethodHead {
		return c.NoContent(status)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// RenderError writes the error page of status with message, for a path the
// console owns: app/http's error boundary calls it with what it mapped the
// error to. A page that needs a session and has none sends a browser to the
// sign-in page instead.
func (cn *Console) RenderError(c echo.Context, status int, message string) error {
	setSecurityHeaders(c.Response().Header())
	if status == http.StatusUnauthorized && (c.Request().Method == http.MethodGet || c.Request().Method == http.MethodHead) {
		return c.Redirect(http.StatusSeeOther, Prefix+"/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
	}
	if status == http.StatusNotFound {
		message = "There is no such page." // never the path as sent: nobody's words on an operator's page
	}
	if _, ok := c.(visit); !ok && status < 500 {
		// An error raised before a page read its session (a 404, a 413): the
		// navigation of a signed-in operator all the same. Not after a 5xx,
		// which may be the database that would be asked again.
		if se, err := cn.sessionOf(c); err == nil {
			c = visit{Context: c, signed: se}
		}
	}
	return cn.render(c, status, "error", view{Title: statusText(status), Data: errorPage{Status: status, Message: message}})
}

// statusText is the name of status; 419 is Laravel's own (a form's CSRF
// token missing or stale).
func statusText(status int) string {
	if status == 419 {
		return "Page Expired"
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "Error"
}

// errorPage is the error page's data.
type errorPage struct {
	Status  int
	Message string
}

// formatTime is t (a resource's time, or a time.Time: resource.FormatTime's)
// as the console shows it: UTC, to the second; "—" for none.
func formatTime(t any) string {
	return orNone(resource.FormatTime(t, "2006-01-02 15:04:05 UTC"), "—")
}

// ago is how long before now t (as formatTime's) was, in the largest unit
// that fits.
func ago(now time.Time, t any) string {
	d := now.Sub(resource.TimeOf(t))
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
