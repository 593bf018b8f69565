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

// column is one column of a table of resources (or one line of a record). Every
// text view is a list of them over the API's resource: --json is the resource.
type column[T any] struct {
	name string
	cell func(T) string
}

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

func writeRecord[T any](w io.Writer, cols []column[T], v T) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cols {
		io.WriteString(tw, c.name+"\t"+c.cell(v)+"\n")
	}
	return tw.Flush()
}

func writeList[T any](w io.Writer, asJSON bool, cols []column[T], rows []T) error {
	if asJSON {
		return writeJSON(w, rows)
	}
	return writeTable(w, cols, rows)
}

// writeJSON prints v indented, "&", "<" and ">" as they are, as the API does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// when is a resource's time to the second, for a table; "-" for none.
func when(t any) string { return orDash(resource.FormatTime(t, time.RFC3339)) }

func orNone(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(*s)
}

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
