package web

import (
	"fmt"
	"time"
)

// barChart is an hourly series drawn as an SVG bar chart by the server:
// the geometry is computed here, the template only writes it out, so the
// page needs no script and no inline style (the CSP allows neither).
type barChart struct {
	ID     string // the element id its title is referred to by
	Title  string
	Total  int64
	Max    int64
	Width  int
	Height int
	AxisY  int // the axis line, under the bars
	LabelY int // the hour labels' baseline
	Bars   []bar
	Ticks  []tick // hour labels along the bottom
}

type bar struct {
	X, Y, W, H float64
	Label      string // "13:00 UTC: 5", the bar's tooltip and accessible name
}

// tick is a label under the bars; Anchor is its text-anchor, so that the
// first and the last stay inside the chart.
type tick struct {
	X      float64
	Text   string
	Anchor string
}

type hourCount struct {
	Hour  time.Time
	Count int64
}

// The chart's geometry, in the SVG's own units. The SVG is drawn at the
// width of its card, which the stylesheet keeps at least about chartWidth
// pixels wide, so a unit is about a pixel or more on every screen and the
// labels' chartFontSize is the size they are read at (at least 11 px).
const (
	chartWidth    = 320
	chartHeight   = 150
	chartFontSize = 13
	chartBottom   = chartFontSize + 9 // room for the hour labels
	chartTop      = 6
)

// newBarChart lays out counts (oldest first, one per hour) as bars scaled to
// the largest; a series of zeros draws a flat axis.
func newBarChart(id, title string, counts []hourCount) barChart {
	ch := barChart{ID: id, Title: title, Width: chartWidth, Height: chartHeight,
		AxisY: chartHeight - chartBottom, LabelY: chartHeight - 5}
	for _, c := range counts {
		ch.Total += c.Count
		ch.Max = max(ch.Max, c.Count)
	}
	if len(counts) == 0 {
		return ch
	}
	slot := float64(chartWidth) / float64(len(counts))
	plot := float64(chartHeight - chartBottom - chartTop)
	for i, c := range counts {
		h := 0.0
		if ch.Max > 0 {
			h = plot * float64(c.Count) / float64(ch.Max)
		}
		if c.Count > 0 && h < 1 {
			h = 1 // a count is never invisible
		}
		x := float64(i) * slot
		ch.Bars = append(ch.Bars, bar{X: x + slot*0.1, Y: float64(chartHeight-chartBottom) - h, W: slot * 0.8, H: h,
			Label: fmt.Sprintf("%s: %d", c.Hour.UTC().Format("15:04 UTC"), c.Count)})
		if i%6 == 0 || i == len(counts)-1 {
			tk := tick{X: x + slot/2, Text: c.Hour.UTC().Format("15h"), Anchor: "middle"}
			switch i {
			case 0:
				tk.X, tk.Anchor = x+slot*0.1, "start"
			case len(counts) - 1:
				tk.X, tk.Anchor = x+slot*0.9, "end"
			}
			ch.Ticks = append(ch.Ticks, tk)
		}
	}
	return ch
}
