package console

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/licensor-api/licensor/app/resource"
)

// column is one column of a table of resources (or one line of a record):
// its header and its cell of a resource. Every text view of the command
// line is a list of them over the API's resource, so that a new view is
// its columns, and --json is the resource itself.
type column[T any] struct {
	name string
	cell func(T) string
}

// writeTable prints rows under the columns' headers, aligned.
func writeTable[T any](w io.Writer, cols []column[T], rows []T) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := make([]string, len(cols))
	for i, c := range cols {
		line[i] = c.name
	}
	io.WriteString(tw, strings.Join(line, "\t")+"\n")
	for _, r := range rows {
		for i, c := range cols {
			line[i] = c.cell(r)
		}
		io.WriteString(tw, strings.Join(line, "\t")+"\n")
	}
	return tw.Flush()
}

// writeRecord prints v a field a line: each column's name, then its cell.
func writeRecord[T any](w io.Writer, cols []column[T], v T) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cols {
		io.WriteString(tw, c.name+"\t"+c.cell(v)+"\n")
	}
	return tw.Flush()
}

// writeList prints rows as the JSON array of the API's objects, or as the
// columns' table.
func writeList[T any](w io.Writer, asJSON bool, cols []column[T], rows []T) error {
	if asJSON {
		return writeJSON(w, rows)
	}
	return writeTable(w, cols, rows)
}

// writeJSON prints v as indented JSON, "&", "<" and ">" as they are, as
// the API writes them.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// when is a resource's time (resource.FormatTime's) in RFC 3339 to the
// second, UTC, for a table; "-" for none.
func when(t any) string { return orDash(resource.FormatTime(t, time.RFC3339)) }

// orNone is *s, "-" when it is nil or empty.
func orNone(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(*s)
}

// orDash is s, "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoted is *s quoted, "-" for none: text that is anyone's (a reason, an
// error, a URL) is never written raw to a terminal.
func quoted(s *string) string {
	if s == nil {
		return "-"
	}
	return strconv.Quote(*s)
}
