package web

import (
	"testing"
	"time"
)

func TestBarChartScalesToTheLargestHour(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var counts []hourCount
	for i := range 24 {
		counts = append(counts, hourCount{Hour: start.Add(time.Duration(i) * time.Hour)})
	}
	counts[3].Count, counts[23].Count, counts[10].Count = 10, 5, 1
	ch := newBarChart("c", "Creates", counts)
	if ch.Total != 16 || ch.Max != 10 || len(ch.Bars) != 24 {
		t.Fatalf("total %d max %d bars %d", ch.Total, ch.Max, len(ch.Bars))
	}
	plot := float64(chartHeight - chartBottom - chartTop)
	if got := ch.Bars[3].H; got != plot {
		t.Errorf("the largest bar is %v high, want the whole plot %v", got, plot)
	}
	if got := ch.Bars[23].H; got != plot/2 {
		t.Errorf("half the largest: %v, want %v", got, plot/2)
	}
	if ch.Bars[0].H != 0 || ch.Bars[10].H < 1 {
		t.Errorf("an empty hour is flat (%v), a count of one is visible (%v)", ch.Bars[0].H, ch.Bars[10].H)
	}
	if ch.Bars[3].Label != "03:00 UTC: 10" || ch.Bars[3].Y+ch.Bars[3].H != chartHeight-chartBottom {
		t.Errorf("bar 3: %+v", ch.Bars[3])
	}
	if flat := newBarChart("z", "Zero", counts[:2]); flat.Max != 0 || flat.Bars[0].H != 0 {
		t.Errorf("all zero: %+v", flat)
	}
}
