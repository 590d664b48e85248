package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// palette gives each series a colour that stays readable on white.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#393b79", "#637939"}

// barRow is one contender in the throughput chart: a median and a spread
// per concurrency.
type barRow struct {
	Label          string
	Median, Lo, Hi []float64
}

// throughputSVG draws horizontal bars: one row per contender, one bar per
// concurrency, with the min..max spread of the rounds as a whisker.
func throughputSVG(title string, series []string, rows []barRow) string {
	const (
		width, left, right, top = 980, 250, 40, 60
		barH, gap               = 9, 12
	)
	rowH := len(series)*barH + gap
	height := top + len(rows)*rowH + 50
	maxV := 0.0
	for _, r := range rows {
		for _, v := range r.Hi {
			maxV = math.Max(maxV, v)
		}
	}
	maxV = niceCeil(maxV)
	plotW := float64(width - left - right)
	x := func(v float64) float64 { return float64(left) + v/maxV*plotW }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for i, s := range series {
		fmt.Fprintf(&b, `<rect x="%d" y="34" width="12" height="10" fill="%s"/><text x="%d" y="43">%s</text>`+"\n",
			left+i*150, palette[i], left+i*150+16, html.EscapeString(s))
	}
	for i := 0; i <= 5; i++ {
		v := maxV * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n",
			x(v), top-4, x(v), height-40, x(v), height-25, human(v))
	}
	for ri, r := range rows {
		y0 := top + ri*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y0+len(series)*barH/2+4, html.EscapeString(r.Label))
		for si := range series {
			y := y0 + si*barH
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, x(r.Median[si])-float64(left), barH-1, palette[si])
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(r.Lo[si]), float64(y)+float64(barH)/2, x(r.Hi[si]), float64(y)+float64(barH)/2)
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333">decisions per second (bar: median of rounds; whisker: min..max)</text>`+"\n", left+int(plotW/2), height-8)
	b.WriteString("</svg>\n")
	return b.String()
}

// lineSeries is one algorithm's curve.
type lineSeries struct {
	Label string
	Y     []float64 // at x = i*step
}

// linesSVG draws admitted-per-rolling-window over time, one line per
// algorithm, with the limit (1.0) marked.
func linesSVG(title, xLabel, yLabel string, step float64, series []lineSeries) string {
	const (
		width, height            = 1060, 520
		left, right, top, bottom = 60, 320, 40, 50
	)
	maxX, maxY := 0.0, 1.2
	for _, s := range series {
		maxX = math.Max(maxX, float64(len(s.Y)-1)*step)
		for _, v := range s.Y {
			maxY = math.Max(maxY, v)
		}
	}
	maxY = math.Ceil(maxY*5) / 5
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	x := func(v float64) float64 { return float64(left) + v/maxX*plotW }
	y := func(v float64) float64 { return float64(top) + plotH - v/maxY*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for v := 0.0; v <= maxY+1e-9; v += 0.2 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%.1f</text>`+"\n",
			left, y(v), x(maxX), y(v), left-6, y(v)+4, v)
	}
	for v := 0.0; v <= maxX+1e-9; v += 0.5 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%.1f</text>`+"\n",
			x(v), top, x(v), y(0), x(v), y(0)+16, v)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-dasharray="6,4"/><text x="%.1f" y="%.1f" fill="black">limit</text>`+"\n",
		left, y(1), x(maxX), y(1), x(maxX)+4, y(1)+4)
	for i, s := range series {
		var pts []string
		for j, v := range s.Y {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(j)*step), y(v)))
		}
		col := palette[i%len(palette)]
		dash := ""
		if i >= len(palette)/2 {
			dash = ` stroke-dasharray="4,2"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		ly := top + 10 + i*18
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+10, ly, width-right+30, ly, col, dash, width-right+36, ly+4, html.EscapeString(s.Label))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", float64(left)+plotW/2, height-10, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle" fill="#333">%s</text>`+"\n", float64(top)+plotH/2, float64(top)+plotH/2, html.EscapeString(yLabel))
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
